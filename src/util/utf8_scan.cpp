// Scans one UTF-8 sequence against the well-formed byte ranges of Unicode's table 3-7.
#include "util/utf8_scan.h"

namespace glacier::util {

Utf8Sequence scan_utf8_sequence(std::string_view text, size_t pos) {
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

}  // namespace glacier::util
