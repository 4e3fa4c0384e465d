// The pre-tokenizer regexes per tokenizer.ggml.pre family, compiled once with PCRE2 (UTF + UCP so
// that \p{L}, \p{N} and \s follow Unicode), and the word splitting that keeps unmatched text.
#include "model/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "util/error.h"
#include "util/utf8_scan.h"

namespace glacier::model {
namespace {

struct NamedKind {
  const char* name;
  PreTokenizerKind kind;
};

// Names the llama.cpp converters write for these three regex families.
const NamedKind kNames[] = {
    {"gpt-2", PreTokenizerKind::Gpt2},         {"gpt2", PreTokenizerKind::Gpt2},
    {"llama-bpe", PreTokenizerKind::Llama3},   {"llama3", PreTokenizerKind::Llama3},
    {"llama-v3", PreTokenizerKind::Llama3},    {"qwen2", PreTokenizerKind::Qwen2},
    {"deepseek-r1-qwen", PreTokenizerKind::Qwen2},
};

// GPT-2's word pattern: English contractions (lower case only), letter runs, digit runs and other
// symbol runs each with one optional leading space, then whitespace that leaves the last space of
// a run to the following word.
const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama 3: contractions in either case, a letter run may take one leading non-letter/non-digit
// (not a newline), digits in groups of at most three, newlines stick to the run before them.
const char* const kLlama3Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2: as Llama 3 but every digit is a word of its own.
const char* const kQwen2Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) return "PCRE2 error " + std::to_string(code);
  return reinterpret_cast<const char*>(buffer);
}

// Length of the well-formed UTF-8 sequence at text[pos], or 0 when it is ill-formed (so PCRE2 can
// match the sanitised text without its own check).
size_t well_formed_length(std::string_view text, size_t pos) {
  const util::Utf8Sequence seq = util::scan_utf8_sequence(text, pos);
  return seq.valid ? seq.length : 0;
}

}  // namespace

std::optional<PreTokenizerKind> pretokenizer_kind(std::string_view pre_name) {
  for (const NamedKind& n : kNames) {
    if (pre_name == n.name) return n.kind;
  }
  return std::nullopt;
}

std::string supported_pretokenizer_names() {
  std::string out;
  for (const NamedKind& n : kNames) {
    if (!out.empty()) out += ", ";
    out += std::string("\"") + n.name + "\"";
  }
  return out;
}

std::string sanitize_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = well_formed_length(text, pos);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++pos;
    } else {
      out.append(text.substr(pos, len));
      pos += len;
    }
  }
  return out;
}

const PreTokenizer& PreTokenizer::get(PreTokenizerKind kind) {
  // Function-local statics: compiled on first use, thread-safe, freed at exit.
  switch (kind) {
    case PreTokenizerKind::Gpt2: {
      static const PreTokenizer gpt2(kGpt2Pattern);
      return gpt2;
    }
    case PreTokenizerKind::Llama3: {
      static const PreTokenizer llama3(kLlama3Pattern);
      return llama3;
    }
    case PreTokenizerKind::Qwen2: {
      static const PreTokenizer qwen2(kQwen2Pattern);
      return qwen2;
    }
  }
  GLACIER_ASSERT(false, "unknown pre-tokenizer kind");
}

PreTokenizer::PreTokenizer(std::string pattern) : pattern_(std::move(pattern)) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.c_str()), pattern_.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
  GLACIER_ASSERT(code != nullptr, "pre-tokenizer regex does not compile at offset " + std::to_string(error_offset) +
                                      ": " + pcre2_message(error));
  // JIT only speeds matching up; without it (unsupported platform) the interpreter gives the same words.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

PreTokenizer::~PreTokenizer() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::string> PreTokenizer::split(std::string_view raw) const {
  const std::string text = sanitize_utf8(raw);
  std::vector<std::string> words;
  if (text.empty()) return words;
  auto* code = static_cast<pcre2_code*>(code_);
  const std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(code, nullptr), &pcre2_match_data_free);
  GLACIER_ASSERT(match != nullptr, "out of memory for PCRE2 match data");
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());

  size_t unmatched_from = 0;  // start of text no match has covered yet
  size_t pos = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      throw InputError("pre-tokenizer: matching /" + pattern_ + "/ failed at byte " + std::to_string(pos) +
                       " of a " + std::to_string(text.size()) + "-byte text (expected a match or none, found " +
                       pcre2_message(rc) + ")");
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const size_t begin = ovector[0], end = ovector[1];
    if (end == begin) {  // none of the patterns matches empty text; step over it all the same
      if (begin >= text.size()) break;
      pos = begin + well_formed_length(text, begin);
      continue;
    }
    if (begin > unmatched_from) words.push_back(text.substr(unmatched_from, begin - unmatched_from));
    words.push_back(text.substr(begin, end - begin));
    pos = unmatched_from = end;
  }
  if (unmatched_from < text.size()) words.push_back(text.substr(unmatched_from));
  return words;
}

}  // namespace glacier::model
