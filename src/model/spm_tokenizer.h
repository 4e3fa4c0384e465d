// SentencePiece-style tokenizer (GGUF tokenizer.ggml.model = "llama"): greedy highest-score pair
// merging over UTF-8 characters with byte fallback, matching llama.cpp's SPM tokenizer.
#pragma once
#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "model/vocab.h"

namespace glacier::model {

class SpmTokenizer final : public Tokenizer {
 public:
  // Defaults llama.cpp assumes for an SPM vocabulary whose file leaves the keys out.
  static VocabDefaults defaults();

  explicit SpmTokenizer(Vocab vocab);

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override;
  std::string token_to_piece(int32_t id, bool special) const override;

  int32_t n_vocab() const override { return vocab_.size(); }
  int32_t bos() const override { return vocab_.bos(); }
  int32_t eos() const override { return vocab_.eos(); }
  bool add_bos() const override { return vocab_.add_bos(); }
  bool is_end_of_generation(int32_t id) const override { return vocab_.is_end_of_generation(id); }
  const std::string& token_text(int32_t id) const override;
  TokenType token_type(int32_t id) const override;

  const Vocab& vocab() const { return vocab_; }

 private:
  // Segments one fragment whose spaces are already "▁" and appends the ids.
  void encode_fragment(const std::string& text, std::vector<int32_t>& out) const;
  // Appends the byte tokens for bytes no token covers.
  void append_bytes(std::string_view bytes, std::vector<int32_t>& out) const;
  void check_id(int32_t id) const;

  Vocab vocab_;
  std::vector<std::string> pieces_;   // token_to_piece(id, special = true), computed once
  std::vector<int32_t> byte_tokens_;  // id standing for each byte value (-1: none, use unk)
};

}  // namespace glacier::model
