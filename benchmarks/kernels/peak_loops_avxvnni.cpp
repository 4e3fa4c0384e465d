// AVX-VNNI peak loop: the 256-bit VEX-encoded vpdpbusd of AVX2 CPUs with AVX-VNNI (see peak_loops.h).
#include <immintrin.h>

#include "peak_loops.h"

namespace glacier::bench {

int32_t vnni_loop_avxvnni(int64_t iterations) {
  __m256i acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_epi32(k);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  for (int64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_dpbusd_avx_epi32(acc[k], a, b);
  int32_t sum = 0;
  for (int k = 0; k < kChains; ++k) sum += _mm_cvtsi128_si32(_mm256_castsi256_si128(acc[k]));
  return sum;
}

}  // namespace glacier::bench
