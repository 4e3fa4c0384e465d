// Golden tests: the byte-level BPE tokenizer gives exactly llama.cpp's ids and pieces for the
// reference strings (GPT-2 vocab, synthetic Qwen2 vocab) and llama.cpp's own GPT-2 vocab test cases.
#include <gtest/gtest.h>

#include <string>

#include "common/test_env.h"
#include "common/tokenizer_reference.h"

namespace glacier::testing {
namespace {


const SharedTokenizeReference kReferences[] = {
    {"Gpt2", "reference/tokenizers/tokenize_gpt2.json", "models/vocab/ggml-vocab-gpt-2.gguf"},
    // The synthetic models' 768-token vocabulary uses the Qwen2 pre-tokenizer (single digits).
    {"SyntheticQwen2", "reference/synthetic/tokenize_bpe768.json", "models/synthetic/synth-qwen2-f32.gguf"},
};

class TokenizerBpeReference : public ::testing::TestWithParam<SharedTokenizeReference> {};

TEST_P(TokenizerBpeReference, MatchesTokenizeJson) {
  expect_matches_shared_tokenize_reference(GetParam(), TokenizerReferenceStyle::kByteLevelBpe);
}
INSTANTIATE_TEST_SUITE_P(TokenizerBpeGolden, TokenizerBpeReference, ::testing::ValuesIn(kReferences),
                         reference_test_name);

// llama.cpp's test-tokenizer-0 cases: inputs each followed by the separator, expected ids one line each.
TEST(TokenizerBpeGolden, Gpt2VocabTestCases) {
  expect_matches_shared_vocab_test_cases("models/vocab/ggml-vocab-gpt-2.gguf");
}

}  // namespace
}  // namespace glacier::testing
