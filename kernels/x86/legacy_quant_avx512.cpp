// AVX-512 (VL/BW, with or without VNNI: built per tier, isa_tier.h) variants of the Q4_1/Q5_0/Q5_1/IQ4_NL
// dots (ggml's lane order, dot_legacy_quant_ref.cpp) and of Q8_1 quantization: dpbusd sums each quad of byte
// products exactly (without VNNI maddubs cannot saturate here: |w| <= 127 and |x| <= 127 give pair sums of
// at most 32258), the fifth bits of Q5 come from a mask register, signs from masked negation. The rest is
// legacy_quant_impl.h.
#include "kernels/x86/gcc_undefined_vector_warning.h"

#include <immintrin.h>

#include <cstring>

#include "kernels/quant_blocks.h"
#include "kernels/x86/isa_tier.h"

namespace glacier::kernels {

namespace {

// 0x10 in byte j where bit j of the 32-bit qh is set.
__m256i fifth_bits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  return _mm256_maskz_mov_epi8(static_cast<__mmask32>(qh), _mm256_set1_epi8(0x10));
}

// Lane sums of 4 products: unsigned weight bytes directly, signed ones as |w| against x with w's sign.
__m256 quads_unsigned(__m256i u, __m256i xq) {
  return _mm256_cvtepi32_ps(x86::dpbusd(_mm256_setzero_si256(), u, xq));
}
__m256i quads_signed_i32(__m256i w, __m256i xq) {
  const __mmask32 negative = _mm256_movepi8_mask(w);
  const __m256i signed_x = _mm256_mask_sub_epi8(xq, negative, _mm256_setzero_si256(), xq);
  return x86::dpbusd(_mm256_setzero_si256(), _mm256_abs_epi8(w), signed_x);
}

}  // namespace

}  // namespace glacier::kernels

#define LEGACY_QUANT_NAME(base) GLACIER_AVX512_TIER_NAME(base##_avx512)
#include "kernels/x86/legacy_quant_impl.h"
