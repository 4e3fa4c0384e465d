// A SentencePiece-style vocabulary made up on the spot (no download): special tokens, the 256 byte
// tokens and English pieces, for synthetic models written without a --vocab-from file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace glacier::model {

struct SyntheticVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // GGUF token types (model::TokenType values)
  static constexpr int32_t kUnk = 0, kBos = 1, kEos = 2;
  static constexpr int32_t kFirstByte = 3;          // "<0x00>" .. "<0xFF>" follow
  static constexpr int32_t kMinSize = 3 + 256;      // specials and byte tokens
};

// The built-in pieces alone (no padding): its size is the natural vocabulary size.
int32_t builtin_vocab_size();

// Exactly n_vocab tokens (n_vocab >= SyntheticVocab::kMinSize): the built-in list, cut short or
// padded with generated syllable pieces. Token texts are unique; longer pieces score higher, so
// the SentencePiece merge prefers whole words.
SyntheticVocab make_synthetic_vocab(int32_t n_vocab);

}  // namespace glacier::model
