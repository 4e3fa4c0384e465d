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
#include "model/vocab.h"
#include "model/vocab_tokenizer.h"

namespace glacier::model {

class BpeTokenizer final : public VocabTokenizer {
 public:
  // Reads tokenizer.ggml.pre (GPT-2 when absent), tokenizer.ggml.merges and the vocabulary; throws
  // InputError naming the file and key for an unsupported pre-tokenizer or a malformed merge.
  static std::unique_ptr<BpeTokenizer> load(const gguf::File& file);

  // Defaults llama.cpp assumes for a BPE vocabulary whose file leaves keys out (Llama 3 adds BOS).
  static VocabDefaults defaults(PreTokenizerKind kind);

  // `merges` are "left right" strings, highest priority first.
  BpeTokenizer(Vocab vocab, const std::vector<std::string>& merges, PreTokenizerKind kind);

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override;


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

  PreTokenizerKind kind_;
  const PreTokenizer& pre_;
  bool ignore_merges_;  // a word that is a token as a whole is taken directly (Llama 3)
  // Keyed by the merge's text "left right": symbols never hold a space after their first byte.
  std::unordered_map<std::string, int32_t, TransparentHash, std::equal_to<>> ranks_;
  std::array<std::string, 256> byte_chars_;  // UTF-8 of the alphabet character standing for each byte
};

}  // namespace glacier::model
