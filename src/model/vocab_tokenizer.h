// What every tokenizer over a GGUF vocabulary shares: the vocabulary, the special ids, and the
// pieces each token stands for (computed once by the concrete tokenizer's constructor).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "model/vocab.h"

namespace glacier::model {

class VocabTokenizer : public Tokenizer {
 public:
  // Control and unknown tokens render their text only when `special`.
  std::string token_to_piece(int32_t id, bool special) const override;
  int32_t n_vocab() const override { return vocab_.size(); }
  int32_t bos() const override { return vocab_.bos(); }
  int32_t eos() const override { return vocab_.eos(); }
  bool add_bos() const override { return vocab_.add_bos(); }
  bool is_end_of_generation(int32_t id) const override { return vocab_.is_end_of_generation(id); }
  const std::string& token_text(int32_t id) const override;
  TokenType token_type(int32_t id) const override;
  const Vocab& vocab() const { return vocab_; }

 protected:
  explicit VocabTokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
  // Throws InputError naming the vocabulary's file for an id outside it.
  void check_id(int32_t id) const;
  // Fills pieces_ for every token by its type: control, user-defined and unknown tokens stand for their
  // own text, unused and undefined ones for nothing, normal and byte tokens for what the tokenizer's
  // functions make of their text.
  using PieceOf = std::function<std::string(const std::string& text)>;
  void fill_pieces(const PieceOf& normal_piece, const PieceOf& byte_piece);

  Vocab vocab_;
  std::vector<std::string> pieces_;  // token_to_piece(id, special = true), filled by the derived constructor
};

}  // namespace glacier::model
