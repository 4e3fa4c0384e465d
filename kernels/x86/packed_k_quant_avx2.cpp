// AVX2 packed K-quant GEMM (packed_k_quant.h, body in packed_k_quant_impl.h): a group's 16 rows as two
// units of 8 (one ymm each), built without AVX-VNNI (maddubs into int16 pairs) and with it (dpbusd).
#include <immintrin.h>

#include "kernels/x86/isa_tier.h"
#include "kernels/x86/packed_k_quant_impl.h"

namespace glacier::kernels {

namespace {

struct V256 {
  static constexpr int kLanes = 8;
  static constexpr bool kVnni = GLACIER_X86_VNNI;
  static constexpr bool kPrefetchPerSubBlock = true;  // spread over the sub-blocks (kPrefetchInSums)
  using I = __m256i;
  using F = __m256;
  static I load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static I bcast32(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
  }
  static I set1_8(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }
  static I set1_32(int32_t v) { return _mm256_set1_epi32(v); }
  static I zero() { return _mm256_setzero_si256(); }
  static I and_(I a, I b) { return _mm256_and_si256(a, b); }
  static I or_(I a, I b) { return _mm256_or_si256(a, b); }
  template <int N>
  static I srli16(I a) { return _mm256_srli_epi16(a, N); }
  template <int N>
  static I slli16(I a) { return _mm256_slli_epi16(a, N); }
  static I srl16(I a, int n) { return _mm256_srl_epi16(a, _mm_cvtsi32_si128(n)); }
  static I sll16(I a, int n) { return _mm256_sll_epi16(a, _mm_cvtsi32_si128(n)); }
  static I maddubs(I u, I s) { return _mm256_maddubs_epi16(u, s); }
  static I madd(I a, I b) { return _mm256_madd_epi16(a, b); }
  static I add32(I a, I b) { return _mm256_add_epi32(a, b); }
  static I add16(I a, I b) { return _mm256_add_epi16(a, b); }
  static I mullo32(I a, I b) { return _mm256_mullo_epi32(a, b); }
  static I dpbusd(I acc, I u, I s) { return x86::dpbusd(acc, u, s); }
  // 8 bytes to 8 32-bit lanes, the value in both int16 halves: each byte doubled, then widened.
  static __m128i doubled_bytes(const uint8_t* p) {
    const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm_unpacklo_epi8(v, v);
  }
  static I scale_pairs_u8(const uint8_t* p) { return _mm256_cvtepu8_epi16(doubled_bytes(p)); }
  static I scale_pairs_i8(const uint8_t* p) { return _mm256_cvtepi8_epi16(doubled_bytes(p)); }
  static I widen_u8_16(const uint8_t* p) { return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static I widen_u8_32(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static I widen_i8_32(const uint8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static F zero_ps() { return _mm256_setzero_ps(); }
  static F set1_ps(float v) { return _mm256_set1_ps(v); }
  static F load_ph(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F cvt(I a) { return _mm256_cvtepi32_ps(a); }
  static void store(float* y, F v, int valid) {
    if (valid >= kLanes) {
      _mm256_storeu_ps(y, v);
      return;
    }
    float out[kLanes];
    _mm256_storeu_ps(out, v);
    for (int l = 0; l < valid; ++l) y[l] = out[l];
  }
};

// Decode: a whole group (two units) a tile; batches: one unit against three rows (three int32 sums, three
// partial sums and three float accumulators leave the levels, the scale and two broadcasts their
// registers). On the Zen 5 VM forced to avx2, one thread, 4096x4096x512, medians of three alternating
// rounds against two and four rows: Q4_K 123 ms (122, 120), Q5_K 120 (143, 124), Q6_K 139 (162, 141).
template <WeightType T>
void gemm256(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end, const uint8_t* x,
             size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  packed_k::gemm<V256, T, 2, 1, 3>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}

}  // namespace

GLACIER_PACKED_GEMM(GLACIER_AVX2_TIER_NAME(packed_gemm_q4_k_avx2)) {
  gemm256<WeightType::Q4_K>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(GLACIER_AVX2_TIER_NAME(packed_gemm_q5_k_avx2)) {
  gemm256<WeightType::Q5_K>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(GLACIER_AVX2_TIER_NAME(packed_gemm_q6_k_avx2)) {
  gemm256<WeightType::Q6_K>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}

}  // namespace glacier::kernels
