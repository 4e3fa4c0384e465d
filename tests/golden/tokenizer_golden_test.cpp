// Golden tests: the SentencePiece tokenizer gives exactly llama.cpp's ids and pieces for the
// reference strings, llama.cpp's own vocab test cases and the generation prompts (../shared).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_env.h"
#include "common/tokenizer_reference.h"

namespace {

using glacier::testing::expect_matches_tokenize_reference;
using glacier::testing::open_tokenizer;
using glacier::testing::TokenizerReferenceStyle;
using Ids = std::vector<int32_t>;

TEST(TokenizerGolden, Stories260KTokenizeJson) {
  GLACIER_REQUIRE_SHARED(json, "reference/stories260K/tokenize.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/stories260K.gguf");
  expect_matches_tokenize_reference(json, vocab, TokenizerReferenceStyle::kSentencePiece);
}

TEST(TokenizerGolden, TokenizersStories260KJson) {
  GLACIER_REQUIRE_SHARED(json, "reference/tokenizers/tokenize_stories260K.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/stories260K.gguf");
  expect_matches_tokenize_reference(json, vocab, TokenizerReferenceStyle::kSentencePiece);
}

TEST(TokenizerGolden, LlamaSpmTokenizeJson) {
  GLACIER_REQUIRE_SHARED(json, "reference/tokenizers/tokenize_llama_spm.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  expect_matches_tokenize_reference(json, vocab, TokenizerReferenceStyle::kSentencePiece);
}

// llama.cpp's test-tokenizer-0 cases: inputs each followed by the separator, expected ids one line each.
TEST(TokenizerGolden, LlamaSpmVocabTestCases) {
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  GLACIER_REQUIRE_SHARED(inp, "models/vocab/ggml-vocab-llama-spm.gguf.inp");
  GLACIER_REQUIRE_SHARED(outp, "models/vocab/ggml-vocab-llama-spm.gguf.out");
  glacier::testing::expect_matches_vocab_test_cases(vocab, inp, outp);
}

TEST(TokenizerGolden, Stories260KGenerationPromptIds) {
  GLACIER_REQUIRE_SHARED(json, "reference/stories260K/generation.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/stories260K.gguf");
  const auto tok = open_tokenizer(vocab);
  const nlohmann::json entries = glacier::testing::read_json(json);
  ASSERT_FALSE(entries.empty());
  for (const nlohmann::json& e : entries) {
    const std::string prompt = e.at("prompt").get<std::string>();
    SCOPED_TRACE("prompt \"" + prompt + "\"");
    EXPECT_EQ(tok->encode(prompt, true, false), e.at("prompt_ids").get<Ids>());
  }
}

// generated_text is the generated tokens' pieces joined with special = false.
TEST(TokenizerGolden, Stories260KGeneratedTextDecodes) {
  GLACIER_REQUIRE_SHARED(json, "reference/stories260K/generation.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/stories260K.gguf");
  const auto tok = open_tokenizer(vocab);
  const nlohmann::json entries = glacier::testing::read_json(json);
  ASSERT_FALSE(entries.empty());
  for (const nlohmann::json& e : entries) {
    SCOPED_TRACE("prompt \"" + e.at("prompt").get<std::string>() + "\"");
    EXPECT_EQ(tok->decode(e.at("generated_ids").get<Ids>(), false), e.at("generated_text").get<std::string>());
  }
}

// The perplexity references tokenize the whole text file (with BOS) and record the token count.
TEST(TokenizerGolden, Stories260KPerplexityTextTokenCount) {
  GLACIER_REQUIRE_SHARED(json, "reference/stories260K/perplexity_c128.json");
  GLACIER_REQUIRE_SHARED(text, "reference/stories260K/ppl_text.txt");
  GLACIER_REQUIRE_SHARED(vocab, "models/stories260K.gguf");
  const auto tok = open_tokenizer(vocab);
  const nlohmann::json ref = glacier::testing::read_json(json);
  const Ids ids = tok->encode(glacier::testing::read_text(text), true, false);
  EXPECT_EQ(static_cast<int64_t>(ids.size()), ref.at("n_tokens_text").get<int64_t>());
}

}  // namespace
