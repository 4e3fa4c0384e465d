// One 32-float block quantized to int8 with 256-bit vectors as ggml-cpu does (scale amax / 127, products
// rounded to nearest even whatever MXCSR says): shared by the Q8_0 (dot_avx2.cpp) and Q8_1
// (legacy_quant_impl.h) row quantizers. Internal linkage: each tier's file compiles its own copy.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "kernels/quant_blocks.h"

namespace glacier::kernels {
namespace {

struct Q8Block256 {
  float amax;
  __m256i q[4];  // int32 quants of elements 8k .. 8k + 7
};

inline Q8Block256 quantize_q8_block_256(const float* xb) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  for (int k = 0; k < 4; ++k) v[k] = _mm256_loadu_ps(xb + 8 * k);
  const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign_bit, v[0]), _mm256_andnot_ps(sign_bit, v[1])),
                                 _mm256_max_ps(_mm256_andnot_ps(sign_bit, v[2]), _mm256_andnot_ps(sign_bit, v[3])));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  Q8Block256 out;
  out.amax = _mm_cvtss_f32(m4);
  const __m256 scale = _mm256_set1_ps(q8_multiplier(out.amax));
  for (int k = 0; k < 4; ++k)
    out.q[k] = _mm256_cvttps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], scale), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return out;
}

// The 32 quants as bytes in element order (the packs interleave 128-bit lanes; the permute restores it).
inline void store_q8_quants_256(const Q8Block256& b, int8_t* qs) {
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(b.q[0], b.q[1]), _mm256_packs_epi32(b.q[2], b.q[3]));
  const __m256i ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), ordered);
}

}  // namespace
}  // namespace glacier::kernels
