// Byte-level BPE tokenizer (GGUF tokenizer.ggml.model = "gpt2"): regex pre-tokenization, GPT-2's
// byte-to-character alphabet and rank-ordered merges (tokenizer.ggml.merges), as llama.cpp does it.
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/pretokenizer.h"
#include "model/tokenizer.h"
#include "model/vocab.h"

namespace glacier::model {

class BpeTokenizer final : public Tokenizer {
 public:
  // Reads tokenizer.ggml.pre (GPT-2 when absent), tokenizer.ggml.merges and the vocabulary; throws
  // InputError naming the file and key for an unsupported pre-tokenizer or a malformed merge.
  static std::unique_ptr<BpeTokenizer> load(const gguf::File& file);

  // Defaults llama.cpp assumes for a BPE vocabulary whose file leaves keys out (Llama 3 adds BOS).
  static VocabDefaults defaults(PreTokenizerKind kind);

  // `merges` are "left right" strings, highest priority first.
  BpeTokenizer(Vocab vocab, const std::vector<std::string>& merges, PreTokenizerKind kind);

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
  PreTokenizerKind pre_tokenizer_kind() const { return kind_; }

 private:
  struct TransparentHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  // Rank of merging `left` and `right` (lower merges first), or -1 when no merge joins them.
  int32_t merge_rank(std::string_view left, std::string_view right) const;
  // Segments one pre-token already written in the byte alphabet and appends the ids.
  void encode_word(const std::string& word, std::vector<int32_t>& out) const;
  void check_id(int32_t id) const;

  Vocab vocab_;
  PreTokenizerKind kind_;
  const PreTokenizer& pre_;
  bool ignore_merges_;  // a word that is a token as a whole is taken directly (Llama 3)
  // Keyed by the merge's text "left right": symbols never hold a space after their first byte.
  std::unordered_map<std::string, int32_t, TransparentHash, std::equal_to<>> ranks_;
  std::array<std::string, 256> byte_chars_;  // UTF-8 of the alphabet character standing for each byte
  std::vector<std::string> pieces_;          // token_to_piece(id, special = true), computed once
};

}  // namespace glacier::model
