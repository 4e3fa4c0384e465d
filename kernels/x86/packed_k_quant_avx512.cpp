// AVX-512 packed K-quant GEMM (packed_k_quant.h, body in packed_k_quant_impl.h): 16 weight rows a zmm,
// built with VNNI (dpbusd sums a sub-block, the avx512 and avx512-nobf16 tiers) and without (maddubs
// into int16 pairs, the avx512-novnni tier).
#include <immintrin.h>

#include "kernels/x86/gcc_undefined_vector_warning.h"

#include "kernels/x86/isa_tier.h"
#include "kernels/x86/packed_k_quant_impl.h"

namespace glacier::kernels {

namespace {

struct V512 {
  static constexpr int kLanes = 16;
  static constexpr bool kVnni = GLACIER_X86_VNNI;
  // One prefetch burst a super-block, as measured on the Zen 5 VM (the spread form is not measured there).
  static constexpr bool kPrefetchPerSubBlock = false;
  using I = __m512i;
  using F = __m512;
  static I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static I bcast32(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
  }
  static I set1_8(int v) { return _mm512_set1_epi8(static_cast<char>(v)); }
  static I set1_32(int32_t v) { return _mm512_set1_epi32(v); }
  static I zero() { return _mm512_setzero_si512(); }
  static I and_(I a, I b) { return _mm512_and_si512(a, b); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  template <int N>
  static I srli16(I a) { return _mm512_srli_epi16(a, N); }
  template <int N>
  static I slli16(I a) { return _mm512_slli_epi16(a, N); }
  static I srl16(I a, int n) { return _mm512_srl_epi16(a, _mm_cvtsi32_si128(n)); }
  static I sll16(I a, int n) { return _mm512_sll_epi16(a, _mm_cvtsi32_si128(n)); }
  static I maddubs(I u, I s) { return _mm512_maddubs_epi16(u, s); }
  static I madd(I a, I b) { return _mm512_madd_epi16(a, b); }
  static I add32(I a, I b) { return _mm512_add_epi32(a, b); }
  static I add16(I a, I b) { return _mm512_add_epi16(a, b); }
  static I mullo32(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I dpbusd(I acc, I u, I s) { return x86::dpbusd(acc, u, s); }
  // 16 bytes to 16 32-bit lanes, the value in both int16 halves.
  static I dup_low16(I v) { return _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(v, 16)); }
  static I scale_pairs_u8(const uint8_t* p) { return dup_low16(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))); }
  static I scale_pairs_i8(const uint8_t* p) { return dup_low16(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))); }
  static I widen_u8_16(const uint8_t* p) { return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static I widen_u8_32(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static I widen_i8_32(const uint8_t* p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F zero_ps() { return _mm512_setzero_ps(); }
  static F set1_ps(float v) { return _mm512_set1_ps(v); }
  static F load_ph(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F cvt(I a) { return _mm512_cvtepi32_ps(a); }
  static void store(float* y, F v, int valid) {
    _mm512_mask_storeu_ps(y, valid >= kLanes ? __mmask16(0xffff) : __mmask16((1u << valid) - 1), v);
  }
};

// Decode: two groups a tile. Batches: Q4_K/Q5_K two groups against four rows (each activation broadcast
// serves two dpbusd; the broadcast loads, not the ALUs, bounded one group against eight rows), Q6_K, whose
// levels cost more to unpack, one group against eight rows. One thread of the Zen 5 VM, 4096 x 4096 x 512,
// medians of three alternating rounds, 2 x 4 against 1 x 8: Q4_K 39 against 46 ms, Q5_K 46 against 50,
// Q6_K 51 against 46.
template <WeightType T>
void gemm512(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end, const uint8_t* x,
             size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  if constexpr (T == WeightType::Q6_K) {
    packed_k::gemm<V512, T, 2, 1, 8>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
  } else {
    packed_k::gemm<V512, T, 2, 2, 4>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
  }
}

}  // namespace

GLACIER_PACKED_GEMM(GLACIER_AVX512_TIER_NAME(packed_gemm_q4_k_avx512)) {
  gemm512<WeightType::Q4_K>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(GLACIER_AVX512_TIER_NAME(packed_gemm_q5_k_avx512)) {
  gemm512<WeightType::Q5_K>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(GLACIER_AVX512_TIER_NAME(packed_gemm_q6_k_avx512)) {
  gemm512<WeightType::Q6_K>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}

}  // namespace glacier::kernels
