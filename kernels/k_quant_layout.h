// Element accessors of the K-quant super-blocks (layouts in quant_blocks.h): one scalar statement of
// where each quantized value lives, shared by dequantization, the reference dots and the tests.
#pragma once
#include <cstdint>

#include "kernels/quant_blocks.h"

namespace glacier::kernels {

// Unsigned 4-bit level (0..15) of element i (0..255) of a Q4_K super-block.
[[gnu::always_inline]] inline int q4_k_level(const BlockQ4_K& b, int i) {
  const uint8_t byte = b.qs[32 * (i / 64) + i % 32];
  return (i % 64) < 32 ? (byte & 0x0f) : (byte >> 4);
}

// Unsigned 5-bit level (0..31) of element i of a Q5_K super-block.
[[gnu::always_inline]] inline int q5_k_level(const BlockQ5_K& b, int i) {
  const uint8_t byte = b.qs[32 * (i / 64) + i % 32];
  const int low = (i % 64) < 32 ? (byte & 0x0f) : (byte >> 4);
  const int bit = (b.qh[i % 32] >> (i / 32)) & 1;  // sub-block i / 32 owns bit i / 32 of qh
  return low | (bit << 4);
}

// Signed scale (-32..31) of sub-block s (0..7) of an IQ4_XS super-block.
[[gnu::always_inline]] inline int iq4_xs_scale(const BlockIQ4_XS& b, int s) {
  const int low = (b.scales_l[s / 2] >> (4 * (s % 2))) & 0x0f;
  const int high = (b.scales_h >> (2 * s)) & 3;
  return (low | (high << 4)) - 32;
}

// Table level (kIQ4NLValues) of element i (0..255) of an IQ4_XS super-block.
[[gnu::always_inline]] inline int iq4_xs_level(const BlockIQ4_XS& b, int i) {
  const uint8_t byte = b.qs[16 * (i / 32) + i % 16];
  return kIQ4NLValues[(i % 32) < 16 ? (byte & 0x0f) : (byte >> 4)];
}

// Signed 6-bit level (-32..31) of element i of a Q6_K super-block.
[[gnu::always_inline]] inline int q6_k_level(const BlockQ6_K& b, int i) {
  const int half = i / 128, within = i % 128, quarter = within / 32, l = within % 32;
  const uint8_t low_byte = b.ql[64 * half + 32 * (quarter % 2) + l];
  const int low = quarter < 2 ? (low_byte & 0x0f) : (low_byte >> 4);
  const int high = (b.qh[32 * half + l] >> (2 * quarter)) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace glacier::kernels
