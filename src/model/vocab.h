// The vocabulary a GGUF file stores under tokenizer.ggml.* (texts, scores, types, special ids and flags),
// validated once, plus the splitting of text on special-token texts that every tokenizer kind shares.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/tokenizer.h"

namespace glacier::model {

// What a tokenizer kind assumes when the file leaves a key out (llama.cpp's per-model defaults).
struct VocabDefaults {
  int32_t bos = -1;
  int32_t eos = -1;
  int32_t unk = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;
};

// A piece of the text to tokenize: either raw text or an already-recognised special token.
struct TextFragment {
  bool is_token = false;
  int32_t token = -1;     // when is_token
  std::string_view text;  // when !is_token: a view into the caller's text, never empty
};

class Vocab {
 public:
  // Reads and validates the tokenizer.ggml.* keys; throws InputError naming the file and the key.
  static Vocab load(const gguf::File& file, const VocabDefaults& defaults);

  const std::string& source() const { return source_; }
  int32_t size() const { return static_cast<int32_t>(texts_.size()); }
  const std::string& text(int32_t id) const { return texts_[static_cast<size_t>(id)]; }
  float score(int32_t id) const { return scores_[static_cast<size_t>(id)]; }
  TokenType type(int32_t id) const { return types_[static_cast<size_t>(id)]; }
  bool contains(int32_t id) const { return id >= 0 && id < size(); }

  // The id whose text is exactly `text`, or -1. When two ids share a text the higher id wins.
  int32_t find(std::string_view text) const;

  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  int32_t unk() const { return unk_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  bool is_end_of_generation(int32_t id) const;

  // Cuts `text` at occurrences of special-token texts. User-defined tokens are always recognised;
  // control and unknown tokens only when parse_special. Longer token texts are cut out first, each
  // over the whole text, left to right (the order llama.cpp uses, which decides overlapping cases).
  std::vector<TextFragment> split_special(std::string_view text, bool parse_special) const;

 private:
  struct TransparentHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::string source_;
  std::vector<std::string> texts_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string, int32_t, TransparentHash, std::equal_to<>> ids_;
  std::vector<int32_t> special_by_length_;  // control, user-defined and unknown ids, longest text first
  std::vector<int32_t> end_of_generation_;
  int32_t bos_ = -1, eos_ = -1, unk_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
};

}  // namespace glacier::model
