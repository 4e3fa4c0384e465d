// Pre-tokenization for byte-level BPE: splits text into words with the regular expression a GGUF
// file's tokenizer.ggml.pre names (GPT-2, Llama 3, Qwen2 styles), Unicode classes from PCRE2.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace glacier::model {

// The regex families; several tokenizer.ggml.pre names share one.
enum class PreTokenizerKind { Gpt2, Llama3, Qwen2 };

// The family a tokenizer.ggml.pre value names, or nullopt when it is not supported.
std::optional<PreTokenizerKind> pretokenizer_kind(std::string_view pre_name);
// The accepted tokenizer.ggml.pre values, quoted and comma separated (for error messages).
std::string supported_pretokenizer_names();

// Replaces each byte that does not start a well-formed UTF-8 sequence with U+FFFD, as llama.cpp
// does before splitting (its splitter works on code points).
std::string sanitize_utf8(std::string_view text);

class PreTokenizer {
 public:
  // The splitter of a family; its regex is compiled on first use and shared (matching is thread-safe).
  static const PreTokenizer& get(PreTokenizerKind kind);

  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;
  ~PreTokenizer();

  // Words of `text` in order; their concatenation is sanitize_utf8(text). Text the regex does not
  // match becomes a word of its own.
  std::vector<std::string> split(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  explicit PreTokenizer(std::string pattern);
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque so users need no PCRE2 headers
};

}  // namespace glacier::model
