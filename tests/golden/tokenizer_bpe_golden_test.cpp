// Golden tests: the byte-level BPE tokenizer gives exactly llama.cpp's ids and pieces for the
// reference strings (GPT-2 vocab, synthetic Qwen2 vocab) and llama.cpp's own GPT-2 vocab test cases.
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

std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path) {
  const auto file = glacier::gguf::File::open(path);
  return Tokenizer::from_gguf(*file);
}

std::string bytes_from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

// Length of the longest prefix of s[i..] that starts a well-formed UTF-8 sequence (at least 1), and
// whether the sequence is complete.
std::pair<size_t, bool> utf8_prefix(const std::string& s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {1, true};
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    lo = b0 == 0xE0 ? 0xA0 : lo;
    hi = b0 == 0xED ? 0x9F : hi;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    lo = b0 == 0xF0 ? 0x90 : lo;
    hi = b0 == 0xF4 ? 0x8F : hi;
  } else {
    return {1, false};
  }
  size_t got = 1;
  while (got <= need && i + got < s.size()) {
    const auto b = static_cast<unsigned char>(s[i + got]);
    const bool fits = got == 1 ? (b >= lo && b <= hi) : (b & 0xC0) == 0x80;
    if (!fits) break;
    ++got;
  }
  return {got, got == need + 1};
}

// The references print a piece with one U+FFFD for each byte outside a complete well-formed
// sequence (a piece holding 2 of the 3 bytes of "▁" shows as two of them).
std::string as_printed_by_reference(const std::string& piece) {
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    const auto [len, complete] = utf8_prefix(piece, i);
    if (complete) {
      out += piece.substr(i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// Every entry of a reference tokenize JSON (reference/README.md "tokenizers/").
void expect_matches_reference(const std::string& json_path, const std::string& vocab_path) {
  const auto tok = open_tokenizer(vocab_path);
  const nlohmann::json entries = glacier::testing::read_json(json_path);
  ASSERT_FALSE(entries.empty()) << json_path;
  for (size_t n = 0; n < entries.size(); ++n) {
    const nlohmann::json& e = entries[n];
    const std::string text = bytes_from_hex(e.at("text_hex").get<std::string>());
    SCOPED_TRACE("entry " + std::to_string(n) + ": \"" + text + "\"");
    ASSERT_EQ(text, e.at("text").get<std::string>());
    const Ids no_special = e.at("ids_no_special").get<Ids>();
    EXPECT_EQ(tok->encode(text, true, false), e.at("ids_add_special").get<Ids>());
    EXPECT_EQ(tok->encode(text, false, false), no_special);
    EXPECT_EQ(tok->encode(text, false, true), e.at("ids_parse_special").get<Ids>());

    std::vector<std::string> pieces;
    for (int32_t id : no_special) pieces.push_back(as_printed_by_reference(tok->token_to_piece(id, true)));
    EXPECT_EQ(pieces, e.at("pieces_no_special").get<std::vector<std::string>>());
    // Byte-level BPE has no dummy prefix: the decoded bytes are the reference's exactly.
    EXPECT_EQ(tok->decode(no_special, false), e.at("detokenized").get<std::string>());
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

TEST(TokenizerBpeGolden, Gpt2TokenizeJson) {
  GLACIER_REQUIRE_SHARED(json, "reference/tokenizers/tokenize_gpt2.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-gpt-2.gguf");
  expect_matches_reference(json, vocab);
}

// The synthetic models' 768-token vocabulary uses the Qwen2 pre-tokenizer (single digits).
TEST(TokenizerBpeGolden, SyntheticQwen2TokenizeJson) {
  GLACIER_REQUIRE_SHARED(json, "reference/synthetic/tokenize_bpe768.json");
  GLACIER_REQUIRE_SHARED(vocab, "models/synthetic/synth-qwen2-f32.gguf");
  expect_matches_reference(json, vocab);
}

// llama.cpp's test-tokenizer-0 cases: inputs each followed by the separator, expected ids one line each.
TEST(TokenizerBpeGolden, Gpt2VocabTestCases) {
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-gpt-2.gguf");
  GLACIER_REQUIRE_SHARED(inp, "models/vocab/ggml-vocab-gpt-2.gguf.inp");
  GLACIER_REQUIRE_SHARED(outp, "models/vocab/ggml-vocab-gpt-2.gguf.out");
  const auto tok = open_tokenizer(vocab);

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

}  // namespace
