// UTF-8 validation and repair following the well-formed byte sequence table of Unicode chapter 3.
#include "io/utf8.h"

namespace glacier::io {
namespace {

// Length of the well-formed sequence starting at text[pos], or 0 when it is ill-formed there.
size_t valid_sequence_length(std::string_view text, size_t pos) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) return 1;
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
    return 0;
  }
  if (pos + length > text.size()) return 0;
  if (byte(pos + 1) < second_lo || byte(pos + 1) > second_hi) return 0;
  for (size_t i = 2; i < length; ++i)
    if ((byte(pos + i) & 0xC0) != 0x80) return 0;
  return length;
}

// How many bytes a bad sequence at pos swallows: the lead plus any continuation bytes that were
// still plausible, so a truncated character becomes a single U+FFFD.
size_t bad_sequence_length(std::string_view text, size_t pos) {
  size_t n = 1;
  while (n < 4 && pos + n < text.size() && (static_cast<unsigned char>(text[pos + n]) & 0xC0) == 0x80 &&
         static_cast<unsigned char>(text[pos]) >= 0xC2)
    ++n;
  return n;
}

}  // namespace

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t n = valid_sequence_length(text, pos);
    if (n == 0) return pos;
    pos += n;
  }
  return std::nullopt;
}

std::string replace_invalid_utf8(std::string_view text) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t n = valid_sequence_length(text, pos);
    if (n > 0) {
      out.append(text.substr(pos, n));
      pos += n;
    } else {
      out.append(kReplacement);
      pos += bad_sequence_length(text, pos);
    }
  }
  return out;
}

}  // namespace glacier::io
