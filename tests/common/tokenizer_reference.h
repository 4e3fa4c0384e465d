// Golden-test helpers for tokenizers: check a GGUF vocabulary against a reference tokenize JSON
// (reference/README.md "tokenizers/") and against llama.cpp's test-tokenizer-0 case files.
#pragma once
#include <memory>
#include <string>

#include "model/tokenizer.h"

namespace glacier::testing {

// How a reference was written for one kind of vocabulary.
enum class TokenizerReferenceStyle {
  // SentencePiece: a piece that is not valid UTF-8 shows one U+FFFD per maximal ill-formed subsequence
  // (the Unicode-recommended replacement); detokenized text lacks the first piece's dummy-prefix space.
  kSentencePiece,
  // Byte-level BPE: one U+FFFD per byte outside a complete well-formed sequence (a piece holding 2 of
  // the 3 bytes of "▁" shows as two of them); detokenized text is the bytes exactly (no dummy prefix).
  kByteLevelBpe,
};

std::unique_ptr<model::Tokenizer> open_tokenizer(const std::string& gguf_path);

// Every entry of a reference tokenize JSON: ids with and without special tokens and with special
// parsing, the pieces, and the detokenized text.
void expect_matches_tokenize_reference(const std::string& json_path, const std::string& vocab_path,
                                       TokenizerReferenceStyle style);

// llama.cpp's test-tokenizer-0 cases for a vocabulary: inputs each followed by the separator line in
// inp_path, expected ids one line each in out_path.
void expect_matches_vocab_test_cases(const std::string& vocab_path, const std::string& inp_path,
                                     const std::string& out_path);

}  // namespace glacier::testing
