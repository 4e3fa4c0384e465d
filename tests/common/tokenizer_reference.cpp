// Test helpers for tokenizers: vocabulary files and their refusals, reference tokenize JSONs and llama.cpp's
// vocab test cases.
#include "common/tokenizer_reference.h"

#include <gtest/gtest.h>

#include <sstream>
#include <utility>
#include <vector>

#include "common/input_error.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"

namespace glacier::testing {
namespace {

using Ids = std::vector<int32_t>;

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
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
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

// A piece as the reference prints it (see TokenizerReferenceStyle).
std::string as_printed_by_reference(const std::string& piece, TokenizerReferenceStyle style) {
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    const auto [len, complete] = utf8_prefix(piece, i);
    if (complete) {
      out += piece.substr(i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += style == TokenizerReferenceStyle::kSentencePiece ? len : 1;
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<model::Tokenizer> open_tokenizer(const std::string& gguf_path) {
  const auto file = gguf::File::open(gguf_path);
  return model::Tokenizer::from_gguf(*file);
}

std::string write_vocab_file(const gguf::Writer& w, const std::string& scratch_name) {
  const std::string path = scratch_dir(scratch_name) + "/vocab.gguf";
  w.write(path);
  return path;
}

std::unique_ptr<model::Tokenizer> tokenizer_of(const gguf::Writer& w, const std::string& scratch_name) {
  return open_tokenizer(write_vocab_file(w, scratch_name));
}

std::string vocab_refusal(const gguf::Writer& w, const std::string& scratch_name, std::string* path,
                          const char* caller_file, int caller_line) {
  const std::string file = write_vocab_file(w, scratch_name);
  if (path) *path = file;
  return input_error_message([&] { open_tokenizer(file); }, caller_file, caller_line);
}

void expect_matches_tokenize_reference(const std::string& json_path, const std::string& vocab_path,
                                       TokenizerReferenceStyle style) {
  const auto tok = open_tokenizer(vocab_path);
  const nlohmann::json entries = read_json(json_path);
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
    for (int32_t id : no_special) pieces.push_back(as_printed_by_reference(tok->token_to_piece(id, true), style));
    EXPECT_EQ(pieces, e.at("pieces_no_special").get<std::vector<std::string>>());

    std::string decoded = tok->decode(no_special, false);
    // llama_detokenize drops one leading space of the first piece for SPM vocabs (the dummy
    // prefix); decode keeps it, so remove it here to compare the remaining bytes exactly.
    if (style == TokenizerReferenceStyle::kSentencePiece && !no_special.empty() && !decoded.empty() &&
        decoded[0] == ' ' && !tok->token_to_piece(no_special[0], false).empty()) {
      decoded.erase(0, 1);
    }
    EXPECT_EQ(decoded, e.at("detokenized").get<std::string>());
  }
}

void expect_matches_vocab_test_cases(const std::string& vocab_path, const std::string& inp_path,
                                     const std::string& out_path) {
  const auto tok = open_tokenizer(vocab_path);
  std::vector<std::string> inputs = split_on(read_text(inp_path), "\n__ggml_vocab_test__\n");
  ASSERT_EQ(inputs.back(), "") << "the .inp file should end with the separator";
  inputs.pop_back();
  std::vector<std::string> lines = split_on(read_text(out_path), "\n");
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

void expect_matches_shared_vocab_test_cases(const std::string& vocab_relative) {
  GLACIER_REQUIRE_SHARED(vocab, vocab_relative);
  GLACIER_REQUIRE_SHARED(inp, vocab_relative + ".inp");
  GLACIER_REQUIRE_SHARED(outp, vocab_relative + ".out");
  expect_matches_vocab_test_cases(vocab, inp, outp);
}

void PrintTo(const SharedTokenizeReference& r, std::ostream* os) { *os << r.name; }

std::string reference_test_name(const ::testing::TestParamInfo<SharedTokenizeReference>& info) {
  return info.param.name;
}

void expect_matches_shared_tokenize_reference(const SharedTokenizeReference& r, TokenizerReferenceStyle style) {
  GLACIER_REQUIRE_SHARED(json, r.json);
  GLACIER_REQUIRE_SHARED(vocab, r.vocab);
  expect_matches_tokenize_reference(json, vocab, style);
}

}  // namespace glacier::testing
