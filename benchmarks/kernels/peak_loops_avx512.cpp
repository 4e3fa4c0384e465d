// AVX-512 peak loops: fp32 FMA and int8 throughput, VNNI (dpbusd) and maddubs, unsigned x signed and signed
// x signed (see peak_loops.h). Only called when the CPU supports AVX-512.
#include <immintrin.h>

// GCC 12's _mm512_undefined_* self-initialise and trip -Wuninitialized (a false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "peak_loops.h"

namespace glacier::bench {

float fma_loop_avx512(int64_t iterations) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(float(k));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-4f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  float sum = 0;
  for (int k = 0; k < kChains; ++k) sum += _mm512_cvtss_f32(acc[k]);
  return sum;
}

int32_t vnni_loop_avx512(int64_t iterations) {
  __m512i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_epi32(k);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], a, b);
  int32_t sum = 0;
  for (int k = 0; k < kChains; ++k) sum += _mm_cvtsi128_si32(_mm512_castsi512_si128(acc[k]));
  return sum;
}

int32_t maddubs_loop_avx512(int64_t iterations) {
  __m512i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_epi32(k);
  // The unsigned operand made opaque every step, as in maddubs_loop_avx2 (constants let the compiler
  // hoist the multiplies); the signed ones are memory operands.
  const SignedOperands<64> s;
  __m512i u = _mm512_set1_epi8(3);
  const __m512i ones = _mm512_set1_epi16(1);
  for (int64_t i = 0; i < iterations; ++i) {
    __asm__ volatile("" : "+v"(u));
    for (int k = 0; k < kChains; ++k)
      acc[k] = _mm512_add_epi32(acc[k], _mm512_madd_epi16(_mm512_maddubs_epi16(u, _mm512_load_si512(s.row[k])), ones));
  }
  int32_t sum = 0;
  for (int k = 0; k < kChains; ++k) sum += _mm_cvtsi128_si32(_mm512_castsi512_si128(acc[k]));
  return sum;
}

int32_t signed_maddubs_loop_avx512(int64_t iterations) {
  __m512i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_epi32(k);
  // As signed_maddubs_loop_avx2, with AVX-512's sign trick (no vpsignb): the activation negated under the
  // mask of the weight's negative bytes.
  const SignedOperands<64> s;
  __m512i w = _mm512_set1_epi8(-3);
  const __m512i ones = _mm512_set1_epi16(1);
  for (int64_t i = 0; i < iterations; ++i) {
    __asm__ volatile("" : "+v"(w));
    const __m512i magnitude = _mm512_abs_epi8(w);
    const __mmask64 negative = _mm512_movepi8_mask(w);
    for (int k = 0; k < kChains; ++k) {
      const __m512i x = _mm512_load_si512(s.row[k]);
      const __m512i signed_x = _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x);
      acc[k] = _mm512_add_epi32(acc[k], _mm512_madd_epi16(_mm512_maddubs_epi16(magnitude, signed_x), ones));
    }
  }
  int32_t sum = 0;
  for (int k = 0; k < kChains; ++k) sum += _mm_cvtsi128_si32(_mm512_castsi512_si128(acc[k]));
  return sum;
}

}  // namespace glacier::bench
