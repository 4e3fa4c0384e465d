// AVX2 packed GEMM (layouts and orders in packed_gemm.h), for x86 CPUs without AVX-512, built with and
// without AVX-VNNI (isa_tier.h): a group's 16 lanes as two halves of 8, one half at a time. Emulated
// dpbusd saturates at 16 bits, so Q8_0 takes the sign trick (|w| times x with w's sign, exact for
// |x| <= 127) on the signed activation in both builds; Q4_0 nibbles are small.
#include <immintrin.h>

#include "kernels/packed_gemm.h"
#include "kernels/x86/isa_tier.h"

namespace glacier::kernels {

namespace {

constexpr int kQuadBytes = 4;
constexpr int kLaneBytes = kPackRows * kQuadBytes;
constexpr int kHalfLanes = 8;
constexpr int kHalfBytes = kHalfLanes * kQuadBytes;

inline __m256i load_ymm(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i broadcast_quad(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}
// Exact 4-byte dot per 32-bit lane (no pair sum saturates for these ranges, see isa_tier.h).
inline __m256i quad_dots(__m256i unsigned_bytes, __m256i signed_bytes) {
  return x86::dpbusd(_mm256_setzero_si256(), unsigned_bytes, signed_bytes);
}

// The signed integer sum of quad q for the 8 rows of half h, before any correction, and whether the
// activation's corrections apply to it.
struct Q8Quads {
  static constexpr WeightType kType = WeightType::Q8_0;
  static constexpr bool kCorrected = false;  // the sign trick multiplies the signed weights directly
  static __m256i isum(const uint8_t* block, int h, int q, const int8_t* xb) {
    const __m256i w = load_ymm(block + q * kLaneBytes + h * kHalfBytes);
    const __m256i x = _mm256_xor_si256(broadcast_quad(xb + q * kQuadBytes), _mm256_set1_epi8(static_cast<char>(0x80)));  // x + 128 -> x
    return quad_dots(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  }
};

// Block-sum Q8_0 stores w + 128. With VNNI that is dpbusd's unsigned side and the activation's block
// correction takes the 128 off; emulated it could saturate (255 * 127 * 2), so back to signed w and the
// sign trick, where the corrections do not apply.
struct Q8OffsetQuads {
  static constexpr WeightType kType = WeightType::Q8_0;
  static constexpr bool kCorrected = GLACIER_X86_VNNI;
  static __m256i isum(const uint8_t* block, int h, int q, const int8_t* xb) {
    const __m256i stored = load_ymm(block + q * kLaneBytes + h * kHalfBytes);
    const __m256i x = broadcast_quad(xb + q * kQuadBytes);
#if GLACIER_X86_VNNI
    return quad_dots(stored, x);
#else
    const __m256i w = _mm256_xor_si256(stored, _mm256_set1_epi8(static_cast<char>(0x80)));
    return quad_dots(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
#endif
  }
};

struct Q4Quads {
  static constexpr WeightType kType = WeightType::Q4_0;
  static constexpr bool kCorrected = true;  // nibbles u hold u - 8: the correction takes the 8 off
  static __m256i isum(const uint8_t* block, int h, int q, const int8_t* xb) {
    const __m256i raw = load_ymm(block + (q % 4) * kLaneBytes + h * kHalfBytes);
    const __m256i nib = q < 4 ? raw : _mm256_srli_epi16(raw, 4);
    return quad_dots(_mm256_and_si256(nib, _mm256_set1_epi8(0x0f)), broadcast_quad(xb + q * kQuadBytes));
  }
};

// The eight lanes of half h of one group, for one activation row.
template <class Quads, bool kBlockSums>
__m256 half_row(const uint8_t* group, int64_t cols, int h, const PackedActivationRow& a) {
  const int64_t nb = cols / kQK8_0;
  const size_t quad_bytes = packed_block_quad_bytes(Quads::kType);
  const uint16_t* wscale = packed_group_scales(Quads::kType, group, cols);
  __m256 lanes[kQuadsPerBlock], acc = _mm256_setzero_ps();
  for (__m256& l : lanes) l = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * quad_bytes;
    const int8_t* xb = a.quants + b * kQK8_0;
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wscale + b * kPackRows + kHalfLanes * h)));
    const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(a.scales[b]));
    if (kBlockSums) {
      __m256i isum = Quads::kCorrected ? _mm256_set1_epi32(a.block_corrections[b]) : _mm256_setzero_si256();
      for (int q = 0; q < kQuadsPerBlock; ++q) isum = _mm256_add_epi32(isum, Quads::isum(block, h, q, xb));
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc);
    } else {
      for (int q = 0; q < kQuadsPerBlock; ++q) {
        __m256i isum = Quads::isum(block, h, q, xb);
        if (Quads::kCorrected) isum = _mm256_add_epi32(isum, _mm256_set1_epi32(a.quad_corrections[b * kQuadsPerBlock + q]));
        lanes[q] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, lanes[q]);
      }
    }
  }
  if (kBlockSums) return acc;
  // dot_ref.cpp's hsum8 tree, lane by lane.
  return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(lanes[4], lanes[0]), _mm256_add_ps(lanes[6], lanes[2])),
                       _mm256_add_ps(_mm256_add_ps(lanes[5], lanes[1]), _mm256_add_ps(lanes[7], lanes[3])));
}

template <class Quads, bool kBlockSums>
void packed_gemm(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end, const uint8_t* x,
                 size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  const size_t group_bytes = packed_group_bytes(Quads::kType, cols);
  for (int64_t g = g_begin; g < g_end; ++g) {
    const int64_t first = g * kPackRows;
    const int64_t valid = rows - first < kPackRows ? rows - first : kPackRows;
    const uint8_t* group = w + g * group_bytes;
    for (int64_t r = 0; r < n_rows; ++r) {
      const PackedActivationRow a = packed_activation_row(x + r * x_row_bytes, cols);
      float out[kPackRows];
      for (int h = 0; h < 2; ++h) _mm256_storeu_ps(out + kHalfLanes * h, half_row<Quads, kBlockSums>(group, cols, h, a));
      for (int64_t l = 0; l < valid; ++l) y[r * ldy + first + l] = out[l];
    }
  }
}

}  // namespace

GLACIER_PACKED_GEMM(GLACIER_AVX2_TIER_NAME(packed_gemm_q8_0_avx2)) {
  packed_gemm<Q8Quads, false>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(GLACIER_AVX2_TIER_NAME(packed_gemm_q8_0_block_sums_avx2)) {
  packed_gemm<Q8OffsetQuads, true>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(GLACIER_AVX2_TIER_NAME(packed_gemm_q4_0_avx2)) {
  packed_gemm<Q4Quads, false>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(GLACIER_AVX2_TIER_NAME(packed_gemm_q4_0_block_sums_avx2)) {
  packed_gemm<Q4Quads, true>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}

}  // namespace glacier::kernels
