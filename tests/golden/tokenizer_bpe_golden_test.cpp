// Golden tests: the byte-level BPE tokenizer gives exactly llama.cpp's ids and pieces for the
// reference strings (GPT-2 vocab, synthetic Qwen2 vocab) and llama.cpp's own GPT-2 vocab test cases.
#include <gtest/gtest.h>

#include <string>

#include "common/test_env.h"
#include "common/tokenizer_reference.h"

namespace {

using glacier::testing::expect_matches_tokenize_reference;
using glacier::testing::TokenizerReferenceStyle;

TEST(TokenizerBpeGolden, Gpt2TokenizeJson) {
  GLACIER_REQUIRE_SHARED(json, "reference/tokenizers/tokenize_gpt2.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-gpt-2.gguf");
  expect_matches_tokenize_reference(json, vocab, TokenizerReferenceStyle::kByteLevelBpe);
}

// The synthetic models' 768-token vocabulary uses the Qwen2 pre-tokenizer (single digits).
TEST(TokenizerBpeGolden, SyntheticQwen2TokenizeJson) {
  GLACIER_REQUIRE_SHARED(json, "reference/synthetic/tokenize_bpe768.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/synthetic/synth-qwen2-f32.gguf");
  expect_matches_tokenize_reference(json, vocab, TokenizerReferenceStyle::kByteLevelBpe);
}

// llama.cpp's test-tokenizer-0 cases: inputs each followed by the separator, expected ids one line each.
TEST(TokenizerBpeGolden, Gpt2VocabTestCases) {
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-gpt-2.gguf");
  GLACIER_REQUIRE_SHARED(inp, "models/vocab/ggml-vocab-gpt-2.gguf.inp");
  GLACIER_REQUIRE_SHARED(outp, "models/vocab/ggml-vocab-gpt-2.gguf.out");
  glacier::testing::expect_matches_vocab_test_cases(vocab, inp, outp);
}

}  // namespace
