// UTF-8 validation and repair following the well-formed byte sequence table of Unicode chapter 3.
#include "io/utf8.h"

#include "util/utf8_scan.h"

namespace glacier::io {
namespace {

std::string replace(std::string_view text, bool nul_too) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    // One U+FFFD a maximal bad prefix (as Python's and WHATWG's decoders do).
    const util::Utf8Sequence seq = util::scan_utf8_sequence(text, pos);
    if (seq.valid && !(nul_too && text[pos] == '\0'))
      out.append(text.substr(pos, seq.length));
    else
      out.append(kReplacement);
    pos += seq.length;
  }
  return out;
}

}  // namespace

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const util::Utf8Sequence seq = util::scan_utf8_sequence(text, pos);
    if (!seq.valid) return pos;
    pos += seq.length;
  }
  return std::nullopt;
}

std::string replace_invalid_utf8(std::string_view text) { return replace(text, false); }

std::string replace_invalid_utf8_and_nul(std::string_view text) { return replace(text, true); }

}  // namespace glacier::io
