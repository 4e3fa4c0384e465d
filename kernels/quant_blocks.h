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
