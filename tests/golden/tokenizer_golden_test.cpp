// Golden tests: the SentencePiece tokenizer gives exactly llama.cpp's ids and pieces for the
// reference strings, llama.cpp's own vocab test cases and the generation prompts (../shared).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/test_env.h"
#include "common/tokenizer_reference.h"

namespace glacier::testing {
namespace {

using model::Tokenizer;
using Ids = std::vector<int32_t>;

const SharedTokenizeReference kReferences[] = {
    {"Stories260K", "reference/stories260K/tokenize.json", "models/stories260K.gguf"},
    {"TokenizersStories260K", "reference/tokenizers/tokenize_stories260K.json", "models/stories260K.gguf"},
    {"LlamaSpm", "reference/tokenizers/tokenize_llama_spm.json", "models/vocab/ggml-vocab-llama-spm.gguf"},
};

class TokenizerSpmReference : public ::testing::TestWithParam<SharedTokenizeReference> {};

TEST_P(TokenizerSpmReference, MatchesTokenizeJson) {
  expect_matches_shared_tokenize_reference(GetParam(), TokenizerReferenceStyle::kSentencePiece);
}
INSTANTIATE_TEST_SUITE_P(TokenizerGolden, TokenizerSpmReference, ::testing::ValuesIn(kReferences), reference_test_name);

// llama.cpp's test-tokenizer-0 cases: inputs each followed by the separator, expected ids one line each.
TEST(TokenizerGolden, LlamaSpmVocabTestCases) {
  expect_matches_shared_vocab_test_cases("models/vocab/ggml-vocab-llama-spm.gguf");
}

// Each entry of stories260K's generation reference (there is at least one) given to `check` with the
// tokenizer of stories260K, under a trace naming its prompt.
void for_each_generation_entry(const std::function<void(const Tokenizer&, const nlohmann::json&)>& check) {
  GLACIER_REQUIRE_SHARED(json, "reference/stories260K/generation.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/stories260K.gguf");
  const auto tok = open_tokenizer(vocab);
  const nlohmann::json entries = read_json(json);
  ASSERT_FALSE(entries.empty());
  for (const nlohmann::json& e : entries) {
    SCOPED_TRACE("prompt \"" + e.at("prompt").get<std::string>() + "\"");
    check(*tok, e);
  }
}

TEST(TokenizerGolden, Stories260KGenerationPromptIds) {
  for_each_generation_entry([](const Tokenizer& tok, const nlohmann::json& e) {
    EXPECT_EQ(tok.encode(e.at("prompt").get<std::string>(), true, false), e.at("prompt_ids").get<Ids>());
  });
}

// generated_text is the generated tokens' pieces joined with special = false.
TEST(TokenizerGolden, Stories260KGeneratedTextDecodes) {
  for_each_generation_entry([](const Tokenizer& tok, const nlohmann::json& e) {
    EXPECT_EQ(tok.decode(e.at("generated_ids").get<Ids>(), false), e.at("generated_text").get<std::string>());
  });
}

// The perplexity references tokenize the whole text file (with BOS) and record the token count.
TEST(TokenizerGolden, Stories260KPerplexityTextTokenCount) {
  GLACIER_REQUIRE_SHARED(json, "reference/stories260K/perplexity_c128.json");
  GLACIER_REQUIRE_SHARED(text, "reference/stories260K/ppl_text.txt");
  GLACIER_REQUIRE_SHARED(vocab, "models/stories260K.gguf");
  const auto tok = open_tokenizer(vocab);
  const nlohmann::json ref = read_json(json);
  const Ids ids = tok->encode(read_text(text), true, false);
  EXPECT_EQ(static_cast<int64_t>(ids.size()), ref.at("n_tokens_text").get<int64_t>());
}

}  // namespace
}  // namespace glacier::testing
