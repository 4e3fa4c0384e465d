// Loads and validates the tokenizer.ggml.* vocabulary of a GGUF file and splits text on the texts of
// special tokens (the step before any tokenizer kind segments the plain text).
#include "model/vocab.h"

#include <algorithm>
#include <limits>
#include <variant>

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace glacier::model {
namespace {

const char* const kTokensKey = "tokenizer.ggml.tokens";
const char* const kScoresKey = "tokenizer.ggml.scores";
const char* const kTypesKey = "tokenizer.ggml.token_type";

// Texts that mark the end of a turn in common chat vocabularies; they stop generation when the
// vocabulary declares them as control tokens.
const char* const kEndOfTurnTexts[] = {"<|eot_id|>", "<|im_end|>", "<|endoftext|>", "<end_of_turn>"};

[[noreturn]] void bad_key(const gguf::File& f, const std::string& key, const std::string& expected,
                          const std::string& found) {
  throw InputError(f.path() + ": key '" + key + "': expected " + expected + ", found " + found);
}

bool is_hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); }

// GGUF writers store "no such token" as -1 in an unsigned key, i.e. 0xFFFFFFFF; both spellings mean none.
int32_t read_special_id(const gguf::File& f, const std::string& key, int32_t fallback, int32_t n_tokens) {
  const gguf::Value* v = f.find(key);
  if (!v) return (fallback >= 0 && fallback < n_tokens) ? fallback : -1;
  if (const int64_t* s = std::get_if<int64_t>(&v->data); s && *s < 0) return -1;
  const uint64_t id = f.get_uint(key);
  if (id == std::numeric_limits<uint32_t>::max() || id == std::numeric_limits<uint64_t>::max()) return -1;
  if (id >= static_cast<uint64_t>(n_tokens)) {
    bad_key(f, key, "a token id below the vocabulary size " + std::to_string(n_tokens), std::to_string(id));
  }
  return static_cast<int32_t>(id);
}

TokenType read_token_type(const gguf::File& f, int32_t raw, size_t index) {
  if (raw < static_cast<int32_t>(TokenType::Undefined) || raw > static_cast<int32_t>(TokenType::Byte)) {
    bad_key(f, kTypesKey, "token types 0..6 (element " + std::to_string(index) + ")", std::to_string(raw));
  }
  return static_cast<TokenType>(raw);
}

}  // namespace

Vocab Vocab::load(const gguf::File& f, const VocabDefaults& defaults) {
  Vocab v;
  v.source_ = f.path();
  v.texts_ = f.get_string_array(kTokensKey);
  if (v.texts_.empty()) bad_key(f, kTokensKey, "at least one token", "an empty array");
  if (v.texts_.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    bad_key(f, kTokensKey, "fewer than 2^31 tokens", std::to_string(v.texts_.size()));
  }
  const size_t n = v.texts_.size();
  const std::string n_text = std::to_string(n) + " elements (one per token in " + kTokensKey + ")";

  if (f.find(kScoresKey)) {
    v.scores_ = f.get_float_array(kScoresKey);
    if (v.scores_.size() != n) bad_key(f, kScoresKey, n_text, std::to_string(v.scores_.size()) + " elements");
  } else {
    v.scores_.assign(n, 0.0f);
  }

  if (f.find(kTypesKey)) {
    const std::vector<int32_t> raw = f.get_int_array(kTypesKey);
    if (raw.size() != n) bad_key(f, kTypesKey, n_text, std::to_string(raw.size()) + " elements");
    v.types_.reserve(n);
    for (size_t i = 0; i < n; ++i) v.types_.push_back(read_token_type(f, raw[i], i));
  } else {
    v.types_.assign(n, TokenType::Normal);
  }

  v.ids_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string& text = v.texts_[i];
    // An empty text could never be matched; give it a unique placeholder as llama.cpp does.
    if (text.empty()) text = "[EMPTY_" + std::to_string(i) + "]";
    if (v.types_[i] == TokenType::Byte) {
      const bool well_formed = text.size() == 6 && text.compare(0, 3, "<0x") == 0 && is_hex_digit(text[3]) &&
                               is_hex_digit(text[4]) && text[5] == '>';
      if (!well_formed) {
        bad_key(f, kTokensKey, "byte token " + std::to_string(i) + " to read \"<0xNN>\"", "\"" + text + "\"");
      }
    }
    v.ids_[text] = static_cast<int32_t>(i);
  }

  const auto n_tokens = static_cast<int32_t>(n);
  v.bos_ = read_special_id(f, "tokenizer.ggml.bos_token_id", defaults.bos, n_tokens);
  v.eos_ = read_special_id(f, "tokenizer.ggml.eos_token_id", defaults.eos, n_tokens);
  v.unk_ = read_special_id(f, "tokenizer.ggml.unknown_token_id", defaults.unk, n_tokens);
  v.add_bos_ = f.find_bool("tokenizer.ggml.add_bos_token").value_or(defaults.add_bos);
  v.add_eos_ = f.find_bool("tokenizer.ggml.add_eos_token").value_or(defaults.add_eos);
  v.add_space_prefix_ = f.find_bool("tokenizer.ggml.add_space_prefix").value_or(defaults.add_space_prefix);
  if (v.add_bos_ && v.bos_ < 0) bad_key(f, "tokenizer.ggml.bos_token_id", "a BOS id (add_bos_token is true)", "none");
  if (v.add_eos_ && v.eos_ < 0) bad_key(f, "tokenizer.ggml.eos_token_id", "an EOS id (add_eos_token is true)", "none");

  if (v.eos_ >= 0) v.end_of_generation_.push_back(v.eos_);
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const int32_t id = read_special_id(f, key, -1, n_tokens);
    if (id >= 0) v.end_of_generation_.push_back(id);
  }
  for (const char* text : kEndOfTurnTexts) {
    const int32_t id = v.find(text);
    if (id >= 0 && v.type(id) == TokenType::Control) v.end_of_generation_.push_back(id);
  }

  for (int32_t id = 0; id < n_tokens; ++id) {
    const TokenType t = v.type(id);
    if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) {
      v.special_by_length_.push_back(id);
    }
  }
  // Stable, so equally long texts keep id order and the result does not depend on the library.
  std::stable_sort(v.special_by_length_.begin(), v.special_by_length_.end(),
                   [&v](int32_t a, int32_t b) { return v.text(a).size() > v.text(b).size(); });
  return v;
}

int32_t Vocab::find(std::string_view text) const {
  auto it = ids_.find(text);
  return it == ids_.end() ? -1 : it->second;
}

bool Vocab::is_end_of_generation(int32_t id) const {
  return std::find(end_of_generation_.begin(), end_of_generation_.end(), id) != end_of_generation_.end();
}

std::vector<TextFragment> Vocab::split_special(std::string_view text, bool parse_special) const {
  std::vector<TextFragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back(TextFragment{false, -1, text});
  std::vector<TextFragment> next;
  for (int32_t id : special_by_length_) {
    const TokenType t = type(id);
    if (!parse_special && (t == TokenType::Control || t == TokenType::Unknown)) continue;
    const std::string& needle = this->text(id);
    next.clear();
    for (const TextFragment& frag : fragments) {
      if (frag.is_token) {
        next.push_back(frag);
        continue;
      }
      std::string_view rest = frag.text;
      for (size_t at = rest.find(needle); at != std::string_view::npos; at = rest.find(needle)) {
        if (at > 0) next.push_back(TextFragment{false, -1, rest.substr(0, at)});
        next.push_back(TextFragment{true, id, {}});
        rest.remove_prefix(at + needle.size());
      }
      if (!rest.empty()) next.push_back(TextFragment{false, -1, rest});
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace glacier::model
