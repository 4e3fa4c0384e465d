// Test helpers for tokenizers: vocabulary files written from a Writer and the refusals of loading them;
// a GGUF vocabulary checked against a reference tokenize JSON (reference/README.md "tokenizers/") and
// against llama.cpp's test-tokenizer-0 case files.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
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

// w written as <scratch_name>/vocab.gguf in a fresh scratch directory; the file's path.
std::string write_vocab_file(const gguf::Writer& w, const std::string& scratch_name);

// The tokenizer of w, written as write_vocab_file does.
std::unique_ptr<model::Tokenizer> tokenizer_of(const gguf::Writer& w, const std::string& scratch_name);

// Base of the fixtures over one hand-made vocabulary: SetUp loads it into tok_; plain() gives the ids of
// a text without BOS and without parsing special tokens, which most hand-worked cases compare.
class VocabTokenizerTest : public ::testing::Test {
 protected:
  std::vector<int32_t> plain(const std::string& text) const { return tok_->encode(text, false, false); }
  std::unique_ptr<model::Tokenizer> tok_;
};

// What the InputError of loading the tokenizer of w (written as write_vocab_file does) says; a test
// failure at the caller's line and "" when it loads. The file's path goes to *path when given.
std::string vocab_refusal(const gguf::Writer& w, const std::string& scratch_name, std::string* path = nullptr,
                          const char* caller_file = __builtin_FILE(), int caller_line = __builtin_LINE());

// Every entry of a reference tokenize JSON: ids with and without special tokens and with special
// parsing, the pieces, and the detokenized text.
void expect_matches_tokenize_reference(const std::string& json_path, const std::string& vocab_path,
                                       TokenizerReferenceStyle style);

// llama.cpp's test-tokenizer-0 cases for a vocabulary: inputs each followed by the separator line in
// inp_path, expected ids one line each in out_path.
void expect_matches_vocab_test_cases(const std::string& vocab_path, const std::string& inp_path,
                                     const std::string& out_path);
// The same for a vocabulary under the shared folder and the <vocab>.inp and <vocab>.out beside it, as
// llama.cpp ships them; skips the test, naming the file, when one of the three is missing.
void expect_matches_shared_vocab_test_cases(const std::string& vocab_relative);

// A reference tokenize JSON under the shared folder and the vocabulary it was written from: one
// parameter of a golden test over several such references.
struct SharedTokenizeReference {
  const char* name;   // names the test instance
  const char* json;   // relative to the shared folder
  const char* vocab;  // likewise
};
void PrintTo(const SharedTokenizeReference& r, std::ostream* os);
std::string reference_test_name(const ::testing::TestParamInfo<SharedTokenizeReference>& info);
// expect_matches_tokenize_reference on r's files; skips the test, naming the file, when one is missing.
void expect_matches_shared_tokenize_reference(const SharedTokenizeReference& r, TokenizerReferenceStyle style);

}  // namespace glacier::testing
