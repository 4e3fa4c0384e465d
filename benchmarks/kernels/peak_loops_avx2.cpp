// AVX2 peak loops: streaming read bandwidth, fp32 FMA and maddubs int8 throughput, unsigned x signed and
// signed x signed (see peak_loops.h).
#include <immintrin.h>

#include "peak_loops.h"

namespace glacier::bench {

float read_sum_avx2(const float* data, size_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (size_t i = 0; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) acc[k] = _mm256_add_ps(acc[k], _mm256_loadu_ps(data + i + 8 * k));
  __m256 s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  return lanes[0] + lanes[7];
}

float fma_loop_avx2(int64_t iterations) {
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(float(k));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-4f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  float sum = 0;
  for (int k = 0; k < kChains; ++k) sum += _mm256_cvtss_f32(acc[k]);
  return sum;
}

int32_t maddubs_loop_avx2(int64_t iterations) {
  __m256i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_epi32(k);
  // A constant pair would let the compiler hoist maddubs and madd out of the loop (the "peak" then timed
  // vpaddd alone): the unsigned operand is made opaque every step, the signed ones are memory operands.
  const SignedOperands<32> s;
  __m256i u = _mm256_set1_epi8(3);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < iterations; ++i) {
    __asm__ volatile("" : "+x"(u));
    for (int k = 0; k < kChains; ++k)
      acc[k] = _mm256_add_epi32(
          acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_load_si256(reinterpret_cast<const __m256i*>(s.row[k]))), ones));
  }
  int32_t sum = 0;
  for (int k = 0; k < kChains; ++k) sum += _mm_cvtsi128_si32(_mm256_castsi256_si128(acc[k]));
  return sum;
}

int32_t signed_maddubs_loop_avx2(int64_t iterations) {
  __m256i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_epi32(k);
  // As maddubs_loop_avx2, with the sign trick of a Q8_0 tile: the weight's magnitude once a step (a tile
  // takes it once for all its activation rows), the weight's sign put on every activation.
  const SignedOperands<32> s;
  __m256i w = _mm256_set1_epi8(-3);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < iterations; ++i) {
    __asm__ volatile("" : "+x"(w));
    const __m256i magnitude = _mm256_abs_epi8(w);
    for (int k = 0; k < kChains; ++k) {
      const __m256i x = _mm256_sign_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(s.row[k])), w);
      acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, x), ones));
    }
  }
  int32_t sum = 0;
  for (int k = 0; k < kChains; ++k) sum += _mm_cvtsi128_si32(_mm256_castsi256_si128(acc[k]));
  return sum;
}

}  // namespace glacier::bench
