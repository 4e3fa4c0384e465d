// IEEE binary16 <-> binary32 conversion in portable C++ (no F16C), used by the reference kernels,
// the GGUF loader and the writer. Round-to-nearest-even; subnormals, infinities and NaN kept.
#include <cstring>

#include "kernels/quant_blocks.h"

namespace glacier::kernels {

namespace {

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Rounds `value >> shift` to nearest, ties to even (shift >= 1).
uint32_t shift_right_rne(uint32_t value, int shift) {
  uint32_t kept = value >> shift;
  uint32_t rest = value & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  return kept;
}

}  // namespace

float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return bits_to_float(sign | 0x7f800000 | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in binary32.
    float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return bits_to_float(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

uint16_t f32_to_fp16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) {
    // NaN: keep the top payload bits and force the quiet bit, as F16C hardware does.
    return static_cast<uint16_t>(sign | 0x7e00 | ((a >> 13) & 0x3ff));
  }
  if (a >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // >= 65520 rounds to infinity
  if (a < 0x38800000) {
    // Below the smallest normal half (2^-14): a subnormal half counts units of 2^-24.
    if (a <= 0x33000000) return sign;  // <= 2^-25 rounds (ties to even) to zero
    const uint32_t biased_exponent = a >> 23;
    const uint32_t significand = (a & 0x7fffff) | 0x800000;
    const int shift = 126 - static_cast<int>(biased_exponent);  // 14..24
    // A carry out of the subnormal range lands exactly on the smallest normal encoding.
    return static_cast<uint16_t>(sign | shift_right_rne(significand, shift));
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits; a carry bumps the exponent.
  const uint32_t rebased = a - (static_cast<uint32_t>(127 - 15) << 23);
  return static_cast<uint16_t>(sign | shift_right_rne(rebased, 13));
}

}  // namespace glacier::kernels
