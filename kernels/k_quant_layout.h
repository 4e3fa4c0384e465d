// Element accessors of the K-quant super-blocks (layouts in quant_blocks.h): one scalar statement of
// where each quantized value lives, shared by dequantization, the reference dots and the tests.
#pragma once
#include <cstdint>

#include "kernels/quant_blocks.h"

namespace glacier::kernels {

// Unsigned 2-bit level (0..3) of element i (0..255) of a Q2_K super-block.
[[gnu::always_inline]] inline int q2_k_level(const BlockQ2_K& b, int i) {
  return (b.qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
}

// Signed 3-bit level (-4..3) of element i of a Q3_K super-block.
[[gnu::always_inline]] inline int q3_k_level(const BlockQ3_K& b, int i) {
  const int low = (b.qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
  const int high = (b.hmask[i % 32] >> (i / 32)) & 1;  // bit 4h + k for element 128h + 32k + l
  return (low | (high << 2)) - 4;
}

// Signed 6-bit scale (-32..31) of sub-block s (0..15) of a Q3_K super-block: its low 4 bits are the low
// nibble of scales[s] for s < 8, the high nibble of scales[s - 8] otherwise; its top 2 bits are bits
// 2 * (s / 4)..+1 of scales[8 + s % 4].
[[gnu::always_inline]] inline int q3_k_scale(const BlockQ3_K& b, int s) {
  const int low = (b.scales[s % 8] >> (4 * (s / 8))) & 0x0f;
  const int high = (b.scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | (high << 4)) - 32;
}

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
