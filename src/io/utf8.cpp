// UTF-8 validation and repair following the well-formed byte sequence table of Unicode chapter 3.
#include "io/utf8.h"

namespace glacier::io {
namespace {

// The sequence at text[pos]: its longest prefix that can still begin a well-formed sequence, and
// whether that prefix is a whole one. A bad prefix becomes one U+FFFD (Unicode's "maximal subpart"
// practice, as Python's and WHATWG's decoders do), so a character cut short is a single U+FFFD.
struct Sequence {
  size_t length;
  bool valid;
};

Sequence scan_sequence(std::string_view text, size_t pos) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return {1, true};
  size_t length = 0;
  unsigned char second_lo = 0x80, second_hi = 0xBF;  // the second byte's range depends on the lead
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_lo = 0xA0;  // no overlong 3-byte forms
    if (lead == 0xED) second_hi = 0x9F;  // no UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_lo = 0x90;  // no overlong 4-byte forms
    if (lead == 0xF4) second_hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return {1, false};  // a continuation byte, or a lead no well-formed sequence has
  }
  for (size_t i = 1; i < length; ++i) {
    if (pos + i >= text.size()) return {i, false};
    const unsigned char lo = i == 1 ? second_lo : 0x80, hi = i == 1 ? second_hi : 0xBF;
    if (byte(pos + i) < lo || byte(pos + i) > hi) return {i, false};
  }
  return {length, true};
}

std::string replace(std::string_view text, bool nul_too) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const Sequence seq = scan_sequence(text, pos);
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
    const Sequence seq = scan_sequence(text, pos);
    if (!seq.valid) return pos;
    pos += seq.length;
  }
  return std::nullopt;
}

std::string replace_invalid_utf8(std::string_view text) { return replace(text, false); }

std::string replace_invalid_utf8_and_nul(std::string_view text) { return replace(text, true); }

}  // namespace glacier::io
