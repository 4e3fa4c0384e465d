// Block layouts of the quantized GGUF types (as the GGUF/ggml format defines them) and the
// half-precision conversions they use. Plain data: shared by kernels, the model loader and the writer.
#pragma once
#include <cstdint>
#include <cstring>

namespace glacier::kernels {

constexpr int kQK8_0 = 32;  // elements per Q8_0 block
constexpr int kQK4_0 = 32;  // elements per Q4_0 block

// Q8_0: one fp16 scale and 32 signed bytes; x = d * q.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q4_0: one fp16 scale and 32 4-bit values packed two a byte; element j (j < 16) is the low nibble of
// qs[j] and element j + 16 the high nibble; x = d * (q - 8).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_1: fp16 scale and min, 32 nibbles in Q4_0's order; x = d * q + m (q in 0..15).
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0: Q4_0's nibbles plus a fifth bit: element j takes bit j of the little-endian 32-bit qh;
// x = d * (q - 16) with q in 0..31.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1: Q5_0's 5-bit q with a min instead of the offset: x = d * q + m.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// Q8_1: activations for the Q4_1/Q5_1 dots: Q8_0 plus s = d * sum(qs) (fp16), which carries the
// weights' min term: sum((dw * q + m) * dx * qx) = dw * dx * sum(q * qx) + m * s.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_1) == 36);

// IQ4_NL: Q4_0's layout, but each nibble indexes a fixed non-linear table of int8 levels:
// x = d * kIQ4NLValues[q]. The values are the format's (ggml's kvalues_iq4nl).
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// The 5-bit level of element j (0..31) of a Q5_0/Q5_1 block, before any offset.
template <class Block>
[[gnu::always_inline]] inline int q5_level(const Block& b, int j) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  const uint8_t byte = b.qs[j % (kQK4_0 / 2)];
  const int nibble = j < kQK4_0 / 2 ? (byte & 0x0f) : (byte >> 4);
  return nibble | static_cast<int>(((qh >> j) & 1u) << 4);
}

// The 4-bit level of element j (0..31) of a Q4_0-layout block (Q4_0, Q4_1, IQ4_NL).
[[gnu::always_inline]] inline int nibble_level(const uint8_t* qs, int j) {
  const uint8_t byte = qs[j % (kQK4_0 / 2)];
  return j < kQK4_0 / 2 ? (byte & 0x0f) : (byte >> 4);
}

constexpr int kQK_K = 256;            // elements per K-quant super-block
constexpr int kKScaleBytes = 12;      // packed 6-bit scales and mins of Q4_K/Q5_K

// Q2_K: 16 sub-blocks of 16, each with a 4-bit scale (low nibble of scales[s]) and a 4-bit min (high
// nibble); 2-bit q: in half h (128 elements) with l < 32, element 128h + 32k + l takes bits 2k..2k+1 of
// qs[32h + l]; x = d * scale_s * q - dmin * min_s for sub-block s = element / 16.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// Q3_K: 16 sub-blocks of 16 with signed 6-bit scales (packed, see q3_k_scale); 3-bit q = 2 low bits in
// Q2_K's order plus a high bit: element 128h + 32k + l takes bit 4h + k of hmask[l]. The stored level is
// q - 4 when that bit is clear and q when it is set, i.e. x = d * (scale_s - 32) * (q3 - 4) with
// q3 = low | high << 2.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kKScaleBytes];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// Q4_K: 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min (packed, see k4_scale_min);
// element 64c + l (l < 32) is the low nibble of qs[32c + l], element 64c + 32 + l its high nibble;
// x = d * scale_s * q - dmin * min_s for sub-block s = element / 32.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: Q4_K plus a fifth bit: element 64c + l takes bit 2c of qh[l], element 64c + 32 + l bit 2c + 1.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 16 sub-blocks of 16 with int8 scales; 6-bit q = 4 low bits from ql, 2 high bits from qh,
// x = d * scales[element / 16] * (q - 32). In half h (128 elements) with l < 32, elements +l, +32+l,
// +64+l, +96+l take the low nibble of ql[64h + l], of ql[64h + 32 + l], the high nibble of
// ql[64h + l], of ql[64h + 32 + l], and bits 0-1, 2-3, 4-5, 6-7 of qh[32h + l].
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// IQ4_XS: 8 sub-blocks of 32 with IQ4_NL's levels and a signed 6-bit scale each: low 4 bits in a
// nibble of scales_l[s / 2] (low nibble for even s), high 2 bits at bits 2s..2s+1 of scales_h, minus
// 32. Sub-block s keeps its nibbles in qs[16s .. 16s + 15], low nibbles its elements 0-15, high 16-31;
// x = d * (scale_s - 32) * kIQ4NLValues[q].
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// Q8_K: activations for the K-quant dots; f32 scale (x = d * q) and the sum of each 16 q's.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// Scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block: sub-blocks 0-3 keep them in the low
// 6 bits of bytes j and j + 4; sub-blocks 4-7 take 4 bits from byte j + 4 and their top 2 bits from
// the spare top bits of bytes j - 4 (scale) and j (min).
[[gnu::always_inline]] inline void k4_scale_min(const uint8_t* packed, int j, int& scale, int& min) {
  if (j < 4) {
    scale = packed[j] & 63;
    min = packed[j + 4] & 63;
  } else {
    scale = (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4);
    min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// The multiplier that maps a Q8_0 block onto [-127, 127], as ggml-cpu's x86 path computes it:
// 127 / amax (not 1 / (amax / 127), which rounds differently), 0 for an all-zero block. Values are
// then rounded half to even. Matching this exactly matters: one quantized value off by one moves the
// logits of a small model by up to ~0.3. A denormal amax whose multiplier overflows quantizes to 0
// (its fp16 scale is 0 anyway), the same in every kernel variant.
[[gnu::always_inline]] inline float q8_multiplier(float amax) {
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  return id <= 3.40282347e38f ? id : 0.0f;
}

// IEEE half <-> float, round-to-nearest-even, with subnormals, infinities and NaN.
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);

// bfloat16 <-> float (round-to-nearest-even; NaN stays NaN).
// The inline helpers here are always inlined: the per-ISA kernel files include this header, and an
// out-of-line copy built with AVX-512 flags could otherwise be the one the linker keeps.
[[gnu::always_inline]] inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
[[gnu::always_inline]] inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 64);  // quiet NaN
  return static_cast<uint16_t>((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

}  // namespace glacier::kernels
