// AVX2 + FMA + F16C variants of the Q4_1/Q5_0/Q5_1/IQ4_NL dots (ggml's lane order, dot_legacy_quant_ref.cpp)
// and of Q8_1 quantization. Unsigned levels (Q4_1, Q5_1) go straight into maddubs; signed ones (Q5_0,
// IQ4_NL) use |w| and x with w's sign. Both are exact while x stays in [-127, 127]. The rest is
// legacy_quant_impl.h.
#include <immintrin.h>

#include <cstring>

#include "kernels/quant_blocks.h"

namespace glacier::kernels {

namespace {

// 0x10 in byte j where bit j of the 32-bit qh is set.
__m256i fifth_bits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(qh)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// Lane sums of 4 products: unsigned weight bytes, or signed ones through |w| and sign(x, w).
__m256 quads_unsigned(__m256i u, __m256i xq) {
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(u, xq), _mm256_set1_epi16(1)));
}
__m256i quads_signed_i32(__m256i w, __m256i xq) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xq, w)), _mm256_set1_epi16(1));
}

}  // namespace

}  // namespace glacier::kernels

#define LEGACY_QUANT_NAME(base) base##_avx2
#include "kernels/x86/legacy_quant_impl.h"
