// Golden tests: the SentencePiece tokenizer gives exactly llama.cpp's ids and pieces for the
// reference strings, llama.cpp's own vocab test cases and the generation prompts (../shared).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "model/tokenizer.h"

namespace {

using glacier::model::Tokenizer;
using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  const auto file = glacier::gguf::File::open(path);
  return Tokenizer::from_gguf(*file);
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// The references show a piece that is not valid UTF-8 with U+FFFD for each maximal ill-formed
// subsequence (the Unicode-recommended replacement); do the same to compare with them.
std::string replace_invalid_utf8(const std::string& s) {
  const std::string kReplacement = "\xEF\xBF\xBD";
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    size_t need = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 < 0x80) {
      out.push_back(s[i++]);
      continue;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
      need = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      need = 2;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      need = 3;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    } else {
      out += kReplacement;
      ++i;
      continue;
    }
    size_t k = 1;
    for (; k <= need && i + k < s.size(); ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
      if (!ok) break;
    }
    if (k == need + 1) {
      out.append(s, i, need + 1);
    } else {
      out += kReplacement;
    }
    i += k;
  }
  return out;
}

// Checks every entry of a reference tokenize JSON (see reference/README.md "tokenizers/").
void check_tokenize_reference(const std::string& json_path, const std::string& vocab_path) {
  const auto tok = load_tokenizer(vocab_path);
  const nlohmann::json entries = glacier::testing::read_json(json_path);
  ASSERT_FALSE(entries.empty()) << json_path;
  for (size_t n = 0; n < entries.size(); ++n) {
    const nlohmann::json& e = entries[n];
    const std::string text = from_hex(e.at("text_hex").get<std::string>());
    SCOPED_TRACE("entry " + std::to_string(n) + ": \"" + text + "\"");
    ASSERT_EQ(text, e.at("text").get<std::string>());
    const Ids no_special = e.at("ids_no_special").get<Ids>();
    EXPECT_EQ(tok->encode(text, true, false), e.at("ids_add_special").get<Ids>());
    EXPECT_EQ(tok->encode(text, false, false), no_special);
    EXPECT_EQ(tok->encode(text, false, true), e.at("ids_parse_special").get<Ids>());

    std::vector<std::string> pieces;
    for (int32_t id : no_special) pieces.push_back(replace_invalid_utf8(tok->token_to_piece(id, true)));
    EXPECT_EQ(pieces, e.at("pieces_no_special").get<std::vector<std::string>>());

    // llama_detokenize drops one leading space of the first piece for SPM vocabs (the dummy
    // prefix); decode keeps it, so remove it here to compare the remaining bytes exactly.
    std::string decoded = tok->decode(no_special, false);
    if (!no_special.empty() && !decoded.empty() && decoded[0] == ' ' &&
        !tok->token_to_piece(no_special[0], false).empty()) {
      decoded.erase(0, 1);
    }
    EXPECT_EQ(decoded, e.at("detokenized").get<std::string>());
  }
}

std::vector<std::string> split_on(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at = text.find(separator); at != std::string::npos; at = text.find(separator, start)) {
    parts.push_back(text.substr(start, at - start));
    start = at + separator.size();
  }
  parts.push_back(text.substr(start));
  return parts;
}

TEST(TokenizerGolden, Stories260KTokenizeJson) {
  GLACIER_REQUIRE_SHARED(json, "reference/stories260K/tokenize.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/stories260K.gguf");
  check_tokenize_reference(json, vocab);
}

TEST(TokenizerGolden, TokenizersStories260KJson) {
  GLACIER_REQUIRE_SHARED(json, "reference/tokenizers/tokenize_stories260K.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/stories260K.gguf");
  check_tokenize_reference(json, vocab);
}

TEST(TokenizerGolden, LlamaSpmTokenizeJson) {
  GLACIER_REQUIRE_SHARED(json, "reference/tokenizers/tokenize_llama_spm.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  check_tokenize_reference(json, vocab);
}

// llama.cpp's test-tokenizer-0 cases: inputs each followed by the separator, expected ids one line each.
TEST(TokenizerGolden, LlamaSpmVocabTestCases) {
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  GLACIER_REQUIRE_SHARED(inp, "models/vocab/ggml-vocab-llama-spm.gguf.inp");
  GLACIER_REQUIRE_SHARED(outp, "models/vocab/ggml-vocab-llama-spm.gguf.out");
  const auto tok = load_tokenizer(vocab);

  std::vector<std::string> inputs = split_on(glacier::testing::read_text(inp), "\n__ggml_vocab_test__\n");
  ASSERT_EQ(inputs.back(), "") << "the .inp file should end with the separator";
  inputs.pop_back();
  std::vector<std::string> lines = split_on(glacier::testing::read_text(outp), "\n");
  ASSERT_EQ(lines.back(), "") << "the .out file should end with a newline";
  lines.pop_back();
  ASSERT_EQ(inputs.size(), lines.size());
  ASSERT_GT(inputs.size(), 40u) << "fewer cases than llama.cpp's file holds";

  for (size_t n = 0; n < inputs.size(); ++n) {
    SCOPED_TRACE("case " + std::to_string(n) + ": \"" + inputs[n] + "\"");
    Ids expected;
    std::istringstream in(lines[n]);
    for (int32_t id; in >> id;) expected.push_back(id);
    ASSERT_TRUE(in.eof()) << "unparsable line: " << lines[n];
    EXPECT_EQ(tok->encode(inputs[n], false, false), expected);
  }
}

TEST(TokenizerGolden, Stories260KGenerationPromptIds) {
  GLACIER_REQUIRE_SHARED(json, "reference/stories260K/generation.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/stories260K.gguf");
  const auto tok = load_tokenizer(vocab);
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
  const auto tok = load_tokenizer(vocab);
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
  const auto tok = load_tokenizer(vocab);
  const nlohmann::json ref = glacier::testing::read_json(json);
  const Ids ids = tok->encode(glacier::testing::read_text(text), true, false);
  EXPECT_EQ(static_cast<int64_t>(ids.size()), ref.at("n_tokens_text").get<int64_t>());
}

}  // namespace
