// Fuzzes the tokenizers through model::Tokenizer: SentencePiece on the synthetic vocabulary and byte-level
// BPE with each pre-tokenizer, encode with and without special-token parsing, and decode of arbitrary ids.
// Checks ids in range, BOS/EOS placement, and the round trip decode(encode(text)) each tokenizer promises.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/pretokenizer.h"
#include "model/synthetic_vocab.h"
#include "model/tokenizer.h"
#include "util/error.h"

namespace {

using namespace glacier;
using model::TokenType;

// Special tokens added to every vocabulary: a user-defined one is split out of any text, the
// control ones only when special tokens are parsed.
const char* const kUserDefinedText = "<tool>";
const char* const kControlTexts[] = {"<|im_start|>", "<|im_end|>", "<|endoftext|>"};

const std::string kSpaceMarker = "\xE2\x96\x81";  // SentencePiece's "▁"

struct FuzzedTokenizer {
  std::string name;
  std::unique_ptr<model::Tokenizer> tokenizer;
  bool is_spm = false;
};
std::vector<FuzzedTokenizer> g_tokenizers;

[[noreturn]] void violated(const std::string& tokenizer, const std::string& what) {
  std::fprintf(stderr, "tokenizer_fuzz: %s: invariant violated: %s\n", tokenizer.c_str(), what.c_str());
  std::abort();
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

// Loads a vocabulary the way the engine does: GGUF bytes, parsed, then Tokenizer::from_gguf.
std::unique_ptr<model::Tokenizer> load(const gguf::Writer& writer, const std::string& name) {
  const std::vector<uint8_t> bytes = writer.serialize();
  const auto file = gguf::File::parse(bytes.data(), bytes.size(), name);
  return model::Tokenizer::from_gguf(*file);
}

std::unique_ptr<model::Tokenizer> make_spm() {
  model::SyntheticVocab v = model::make_synthetic_vocab(model::builtin_vocab_size());
  auto add = [&v](const std::string& text, TokenType type) {
    v.tokens.push_back(text);
    v.scores.push_back(0.0f);
    v.types.push_back(static_cast<int32_t>(type));
  };
  add(kUserDefinedText, TokenType::UserDefined);
  for (const char* text : kControlTexts) add(text, TokenType::Control);
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_f32_array("tokenizer.ggml.scores", v.scores);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  w.set_u32("tokenizer.ggml.bos_token_id", model::SyntheticVocab::kBos);
  w.set_u32("tokenizer.ggml.eos_token_id", model::SyntheticVocab::kEos);
  w.set_bool("tokenizer.ggml.add_eos_token", true);  // so that add_special places both ends
  return load(w, "synthetic-spm.gguf");
}

// GPT-2's printable alphabet: byte b is the character U+00b when printable Latin-1, else U+0100 + n.
std::vector<std::string> byte_alphabet() {
  std::vector<std::string> chars(256);
  uint32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
    if (cp < 0x80) {
      chars[b] = std::string(1, static_cast<char>(cp));
    } else {
      chars[b] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
  }
  return chars;
}

// A byte-level BPE vocabulary: the 256 alphabet characters, then for each word the merges that build
// it left to right, each merge's result being a token too (so every merged symbol has an id), then
// the special tokens. Words cover ASCII, Latin, CJK, emoji, digits and whitespace runs.
std::unique_ptr<model::Tokenizer> make_bpe(const std::string& pre) {
  static const char* const kWords[] = {
      " the", " and", "ing", " Hello", " world", "Hello", " to", " of", "ed", " a", "er", "'s", "123", "2024",
      "  ", "\n\n", " \n", "\t", " caf\xC3\xA9", "\xC3\xB1", " \xE6\x97\xA5\xE6\x9C\xAC", "\xE8\xAA\x9E",
      " \xF0\x9F\x98\x80", "\xEF\xBF\xBD", " <", "|>", "im", "_start", "end", " tool", "\xE2\x96\x81",
  };
  const std::vector<std::string> alphabet = byte_alphabet();
  std::vector<std::string> tokens(alphabet);
  std::set<std::string> known(tokens.begin(), tokens.end());
  std::vector<std::string> merges;
  std::set<std::string> known_merges;
  for (const char* word : kWords) {
    std::string built;
    for (const char* p = word; *p; ++p) {
      const std::string& next = alphabet[static_cast<unsigned char>(*p)];
      if (!built.empty() && known_merges.insert(built + " " + next).second) merges.push_back(built + " " + next);
      built += next;
      if (known.insert(built).second) tokens.push_back(built);
    }
  }
  std::vector<int32_t> types(tokens.size(), static_cast<int32_t>(TokenType::Normal));
  tokens.push_back(kUserDefinedText);
  types.push_back(static_cast<int32_t>(TokenType::UserDefined));
  const auto first_control = static_cast<uint32_t>(tokens.size());
  for (const char* text : kControlTexts) {
    tokens.push_back(text);
    types.push_back(static_cast<int32_t>(TokenType::Control));
  }
  gguf::Writer w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", merges);
  w.set_u32("tokenizer.ggml.bos_token_id", first_control);
  w.set_u32("tokenizer.ggml.eos_token_id", first_control + 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  return load(w, "synthetic-bpe-" + pre + ".gguf");
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  for (size_t pos = 0;;) {
    const size_t at = text.find(from, pos);
    out.append(text.substr(pos, at == std::string_view::npos ? std::string_view::npos : at - pos));
    if (at == std::string_view::npos) return out;
    out.append(to);
    pos = at + from.size();
  }
}

// What decode(encode(text), special = true) must give when no special token is split out of `text`,
// or nullopt when the tokenizer promises nothing. Byte-level BPE gives the text back with ill-formed
// UTF-8 replaced by U+FFFD. SentencePiece writes spaces as "▁" and adds one leading space (so a "▁"
// in the text comes back as a space), for valid UTF-8 only: it cuts text into characters by their
// lead bytes, so a truncated character can swallow the first bytes of a following "▁".
std::optional<std::string> expected_round_trip(const FuzzedTokenizer& t, std::string_view text) {
  const std::string sanitized = model::sanitize_utf8(text);
  if (!t.is_spm) return sanitized;
  if (sanitized != text) return std::nullopt;
  if (text.empty()) return "";
  return " " + replace_all(text, kSpaceMarker, " ");
}

void check_ids_in_range(const FuzzedTokenizer& t, const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    if (id < 0 || id >= t.tokenizer->n_vocab()) violated(t.name, "id " + std::to_string(id) + " out of range");
}

void fuzz_encode(const FuzzedTokenizer& t, std::string_view text) {
  const model::Tokenizer& tok = *t.tokenizer;
  const std::vector<int32_t> plain = tok.encode(text, false, false);
  check_ids_in_range(t, plain);
  const std::optional<std::string> expected = expected_round_trip(t, text);
  if (expected && text.find(kUserDefinedText) == std::string_view::npos) {
    const std::string decoded = tok.decode(plain, true);
    if (decoded != *expected) {
      violated(t.name, "decode(encode(text)) differs from the text; ids " + join_ids(plain) + "; text " +
                           std::to_string(text.size()) + " bytes, decoded " + std::to_string(decoded.size()));
    }
  }

  const std::vector<int32_t> with_special = tok.encode(text, true, true);
  check_ids_in_range(t, with_special);
  if (tok.add_bos() && (with_special.empty() || with_special.front() != tok.bos()))
    violated(t.name, "add_special did not start with BOS: " + join_ids(with_special));
  tok.decode(with_special, false);
  tok.decode(with_special, true);
}

// Any int32 may reach decode (prompt_token_ids come from users): in range it gives the piece,
// outside it InputError.
void fuzz_decode(const FuzzedTokenizer& t, const uint8_t* data, size_t size) {
  const model::Tokenizer& tok = *t.tokenizer;
  std::vector<int32_t> ids(size / sizeof(int32_t));
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * sizeof(int32_t));
  bool all_in_range = true;
  for (int32_t& id : ids) {
    all_in_range = all_in_range && id >= 0 && id < tok.n_vocab();
    try {
      tok.token_to_piece(id, false);
      tok.token_text(id);
      tok.token_type(id);
      tok.is_end_of_generation(id);
    } catch (const InputError&) {
      if (id >= 0 && id < tok.n_vocab()) violated(t.name, "InputError for the valid id " + std::to_string(id));
    }
  }
  try {
    tok.decode(ids, true);
    if (!all_in_range) violated(t.name, "decode accepted an id out of range");
  } catch (const InputError&) {
    if (all_in_range) violated(t.name, "decode refused ids all in range");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_tokenizers.push_back({"spm", make_spm(), true});
  for (const char* pre : {"gpt-2", "llama-bpe", "qwen2"})
    g_tokenizers.push_back({std::string("bpe-") + pre, make_bpe(pre), false});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const FuzzedTokenizer& t : g_tokenizers) {
    fuzz_encode(t, text);
    fuzz_decode(t, data, size);
  }
  return 0;
}
