// AVX2 packed GEMM (layouts and orders in packed_gemm.h), for x86 CPUs without AVX-512, built with and
// without AVX-VNNI (isa_tier.h): a group's 16 lanes as two halves of 8. Block sums (what the loader picks)
// run register tiles of a half x 4 activation rows; lane order one half and one row at a time. Emulated
// dpbusd saturates at 16 bits, so Q8_0 takes the sign trick (|w| times x with w's sign, exact for
// |x| <= 127) on the signed activation; Q4_0 nibbles are small.
#include <immintrin.h>

#include <type_traits>

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

// Lane order: the signed integer sum of quad q for the 8 rows of half h, before any correction, and
// whether the activation's corrections apply to it.
struct Q8Quads {
  static constexpr WeightType kType = WeightType::Q8_0;
  static constexpr bool kCorrected = false;  // the sign trick multiplies the signed weights directly
  static __m256i isum(const uint8_t* block, int h, int q, const int8_t* xb) {
    const __m256i w = load_ymm(block + q * kLaneBytes + h * kHalfBytes);
    const __m256i x = _mm256_xor_si256(broadcast_quad(xb + q * kQuadBytes), _mm256_set1_epi8(static_cast<char>(0x80)));  // x + 128 -> x
    return quad_dots(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
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

// Ends GCC's reassociation of a block's integer additions: left alone it computes all the block's
// products first and sums them as a tree, spilling most of them to the stack.
inline void keep_in_register(__m256i& v) { __asm__("" : "+x"(v)); }

// Block-sum order in register tiles: G halves (8 weight rows each) of one group x R activation rows,
// each block's exact integer sums in G * R int32 registers, converted and fused once a block.

// Adds one block's products to acc[g][r] (started at the activation's block correction where
// kCorrected, else zero) for halves h0 .. h0 + G - 1 of a group.
struct Q8BlockSums {
  static constexpr WeightType kType = WeightType::Q8_0;
  static constexpr bool kCorrected = GLACIER_X86_VNNI;
  // Batch tiles: one half (8 weight rows) x 8 activation rows, 8 int32 sums and the quad's |w|, w's sign,
  // x and a product in registers; the float sums, touched once a block, may spill. The quad's |w| and sign
  // serve twice the rows of a 4-row tile. Zen 3, one thread, 4096x4096, medians of three alternating
  // rounds: 8 rows 150-152 ms at 512 rows against 156-168 with 4, 2.35-2.53 against 2.55-3.02 at 8.
  // With VNNI (no |w| or sign to share; not measured on such a CPU yet) the tile keeps 4 rows.
  static constexpr int kTileRows = GLACIER_X86_VNNI ? 4 : 8;
  template <int G, int R>
  static void accumulate(const uint8_t* block, int h0, const int8_t* const (&xb)[R], __m256i (&acc)[G][R]) {
    // Unrolled: GCC 12 left the sign trick's quad loop rolled and stored every int32 sum to the stack each
    // quad (the VNNI loop it unrolls itself). Zen 3, one thread, 4096x4096: 512 rows 173-182 -> 159-164
    // ms, 8 rows 2.92-3.10 -> 2.57-2.69 ms.
#pragma GCC unroll 8
    for (int q = 0; q < kQuadsPerBlock; ++q) {
#if GLACIER_X86_VNNI  // the stored w + 128 is dpbusd's unsigned side, the correction takes the 128 off
      __m256i w[G];
      for (int g = 0; g < G; ++g) w[g] = load_ymm(block + q * kLaneBytes + (h0 + g) * kHalfBytes);
      for (int r = 0; r < R; ++r) {
        const __m256i x = broadcast_quad(xb[r] + q * kQuadBytes);
        for (int g = 0; g < G; ++g) acc[g][r] = x86::dpbusd(acc[g][r], w[g], x);
      }
#else  // the sign trick: |w| and w's sign prepared once per weight quad, for all R activation rows
      __m256i magnitude[G], sign[G];
      for (int g = 0; g < G; ++g) {
        sign[g] = _mm256_xor_si256(load_ymm(block + q * kLaneBytes + (h0 + g) * kHalfBytes),
                                   _mm256_set1_epi8(static_cast<char>(0x80)));
        magnitude[g] = _mm256_abs_epi8(sign[g]);
      }
      for (int r = 0; r < R; ++r) {
        const __m256i x = broadcast_quad(xb[r] + q * kQuadBytes);
        for (int g = 0; g < G; ++g) acc[g][r] = x86::dpbusd(acc[g][r], magnitude[g], _mm256_sign_epi8(x, sign[g]));
      }
      for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) keep_in_register(acc[g][r]);
#endif
    }
  }
};

// Nibbles u <= 15 against |x| <= 127: no pair sum near the int16 limit, exact emulated too.
struct Q4BlockSums {
  static constexpr WeightType kType = WeightType::Q4_0;
  static constexpr bool kCorrected = true;  // the correction takes the 8 off the nibbles
  // One half x 4 rows: with 8 the same Zen 3 run measured 132-135 ms against 129-131 at 512 rows.
  static constexpr int kTileRows = 4;
  template <int G, int R>
  static void accumulate(const uint8_t* block, int h0, const int8_t* const (&xb)[R], __m256i (&acc)[G][R]) {
    const __m256i low_mask = _mm256_set1_epi8(0x0f);
    for (int j = 0; j < kQuadsPerBlock / 2; ++j) {
      __m256i lo[G], hi[G];
      for (int g = 0; g < G; ++g) {
        const __m256i raw = load_ymm(block + j * kLaneBytes + (h0 + g) * kHalfBytes);
        lo[g] = _mm256_and_si256(raw, low_mask);
        hi[g] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low_mask);
      }
      for (int r = 0; r < R; ++r) {
        const __m256i xlo = broadcast_quad(xb[r] + j * kQuadBytes), xhi = broadcast_quad(xb[r] + 16 + j * kQuadBytes);
        for (int g = 0; g < G; ++g) acc[g][r] = x86::dpbusd(x86::dpbusd(acc[g][r], lo[g], xlo), hi[g], xhi);
      }
      for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) keep_in_register(acc[g][r]);
    }
  }
};

// Blocks ahead that the tile reading a group from memory prefetches (the AVX-512 kernel measured 4 to 12
// alike for decode).
constexpr int64_t kPrefetchBlocks = 6;

// Halves [h0, h0 + G) of group `group` x activation rows a[0 .. R); writes the rows valid of the group.
// kPrefetch: the tile that first reads the group (later row tiles find it in the caches).
template <class Quads, int G, int R, bool kPrefetch>
void block_sum_tile(const uint8_t* group, int64_t cols, int h0, int64_t valid, const PackedActivationRow* a,
                    float* y, int64_t ldy) {
  const int64_t nb = cols / kQK8_0;
  const size_t quad_bytes = packed_block_quad_bytes(Quads::kType);
  const uint16_t* wscale = packed_group_scales(Quads::kType, group, cols);
  __m256 facc[G][R];
  for (int g = 0; g < G; ++g)
    for (int r = 0; r < R; ++r) facc[g][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * quad_bytes;
    if (kPrefetch) {
      for (size_t off = 0; off < quad_bytes; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(block + kPrefetchBlocks * quad_bytes + off), _MM_HINT_T0);
      if (b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(wscale + (b + kPrefetchBlocks) * kPackRows), _MM_HINT_T0);
    }
    const int8_t* xb[R];
    __m256i acc[G][R];
    for (int r = 0; r < R; ++r) {
      xb[r] = a[r].quants + b * kQK8_0;
      const __m256i start = Quads::kCorrected ? _mm256_set1_epi32(a[r].block_corrections[b]) : _mm256_setzero_si256();
      for (int g = 0; g < G; ++g) acc[g][r] = start;
    }
    Quads::template accumulate<G, R>(block, h0, xb, acc);
    __m256 dw[G];
    for (int g = 0; g < G; ++g)
      dw[g] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wscale + b * kPackRows + kHalfLanes * (h0 + g))));
    for (int r = 0; r < R; ++r) {
      const __m256 dx = _mm256_set1_ps(a[r].scales[b]);
      for (int g = 0; g < G; ++g)
        facc[g][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[g][r]), _mm256_mul_ps(dw[g], dx), facc[g][r]);
    }
  }
  for (int g = 0; g < G; ++g) {
    const int64_t lane0 = kHalfLanes * (h0 + g);
    const int64_t n = valid - lane0 < kHalfLanes ? valid - lane0 : kHalfLanes;
    for (int r = 0; r < R; ++r) {
      if (n == kHalfLanes) {
        _mm256_storeu_ps(y + r * ldy + lane0, facc[g][r]);
      } else {
        float out[kHalfLanes];
        _mm256_storeu_ps(out, facc[g][r]);
        for (int64_t l = 0; l < n; ++l) y[r * ldy + lane0 + l] = out[l];
      }
    }
  }
}

// Activation rows of a batch in tiles of kRows, then one of the rest, for halves [h0, h0 + G).
template <class Quads, int G, int kRows>
void block_sum_rows(const uint8_t* group, int64_t cols, int h0, int64_t valid, const PackedActivationRow* a,
                    int64_t n_rows, float* y, int64_t ldy) {
  int64_t r = 0;
  for (; r + kRows <= n_rows; r += kRows)
    r == 0 ? block_sum_tile<Quads, G, kRows, true>(group, cols, h0, valid, a + r, y + r * ldy, ldy)
           : block_sum_tile<Quads, G, kRows, false>(group, cols, h0, valid, a + r, y + r * ldy, ldy);
  const int64_t rest = n_rows - r;
  if (rest == 0) return;
  const bool first = r == 0;
  auto run = [&](auto rows_tag) {
    constexpr int kRest = decltype(rows_tag)::value;
    first ? block_sum_tile<Quads, G, kRest, true>(group, cols, h0, valid, a + r, y + r * ldy, ldy)
          : block_sum_tile<Quads, G, kRest, false>(group, cols, h0, valid, a + r, y + r * ldy, ldy);
  };
  static_assert(kRows <= 8, "rest tiles below cover up to 7 rows");
  switch (rest) {
    case 7: if constexpr (kRows > 7) run(std::integral_constant<int, 7>{}); break;
    case 6: if constexpr (kRows > 6) run(std::integral_constant<int, 6>{}); break;
    case 5: if constexpr (kRows > 5) run(std::integral_constant<int, 5>{}); break;
    case 4: if constexpr (kRows > 4) run(std::integral_constant<int, 4>{}); break;
    case 3: if constexpr (kRows > 3) run(std::integral_constant<int, 3>{}); break;
    case 2: if constexpr (kRows > 2) run(std::integral_constant<int, 2>{}); break;
    case 1: run(std::integral_constant<int, 1>{}); break;
    default: break;
  }
}

template <class Quads>
void block_sum_gemm(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end, const uint8_t* x,
                    size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  const size_t group_bytes = packed_group_bytes(Quads::kType, cols);
  constexpr int kBatchRows = 64;  // activation row pointers resolved a batch slice at a time
  PackedActivationRow a[kBatchRows];
  for (int64_t r0 = 0; r0 < n_rows; r0 += kBatchRows) {
    const int64_t n = n_rows - r0 < kBatchRows ? n_rows - r0 : kBatchRows;
    for (int64_t r = 0; r < n; ++r) a[r] = packed_activation_row(x + (r0 + r) * x_row_bytes, cols);
    for (int64_t g = g_begin; g < g_end; ++g) {
      const int64_t first = g * kPackRows;
      const int64_t valid = rows - first < kPackRows ? rows - first : kPackRows;
      const uint8_t* group = w + g * group_bytes;
      float* yg = y + r0 * ldy + first;
      if (n <= 2) {  // decode: both halves at once, one weight stream
        n == 1 ? block_sum_tile<Quads, 2, 1, true>(group, cols, 0, valid, a, yg, ldy)
               : block_sum_tile<Quads, 2, 2, true>(group, cols, 0, valid, a, yg, ldy);
        continue;
      }
      for (int h = 0; h < 2 && kHalfLanes * h < valid; ++h)
        block_sum_rows<Quads, 1, Quads::kTileRows>(group, cols, h, valid, a, n, yg, ldy);
    }
  }
}

// Lane order: the eight lanes of half h of one group, for one activation row.
template <class Quads>
__m256 half_row(const uint8_t* group, int64_t cols, int h, const PackedActivationRow& a) {
  const int64_t nb = cols / kQK8_0;
  const size_t quad_bytes = packed_block_quad_bytes(Quads::kType);
  const uint16_t* wscale = packed_group_scales(Quads::kType, group, cols);
  __m256 lanes[kQuadsPerBlock];
  for (__m256& l : lanes) l = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* block = group + b * quad_bytes;
    const int8_t* xb = a.quants + b * kQK8_0;
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wscale + b * kPackRows + kHalfLanes * h)));
    const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(a.scales[b]));
    for (int q = 0; q < kQuadsPerBlock; ++q) {
      __m256i isum = Quads::isum(block, h, q, xb);
      if (Quads::kCorrected) isum = _mm256_add_epi32(isum, _mm256_set1_epi32(a.quad_corrections[b * kQuadsPerBlock + q]));
      lanes[q] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, lanes[q]);
    }
  }
  // dot_ref.cpp's hsum8 tree, lane by lane.
  return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(lanes[4], lanes[0]), _mm256_add_ps(lanes[6], lanes[2])),
                       _mm256_add_ps(_mm256_add_ps(lanes[5], lanes[1]), _mm256_add_ps(lanes[7], lanes[3])));
}

template <class Quads>
void lane_gemm(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end, const uint8_t* x,
               size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  const size_t group_bytes = packed_group_bytes(Quads::kType, cols);
  for (int64_t g = g_begin; g < g_end; ++g) {
    const int64_t first = g * kPackRows;
    const int64_t valid = rows - first < kPackRows ? rows - first : kPackRows;
    const uint8_t* group = w + g * group_bytes;
    for (int64_t r = 0; r < n_rows; ++r) {
      const PackedActivationRow a = packed_activation_row(x + r * x_row_bytes, cols);
      float out[kPackRows];
      for (int h = 0; h < 2; ++h) _mm256_storeu_ps(out + kHalfLanes * h, half_row<Quads>(group, cols, h, a));
      for (int64_t l = 0; l < valid; ++l) y[r * ldy + first + l] = out[l];
    }
  }
}

}  // namespace

GLACIER_PACKED_GEMM(GLACIER_AVX2_TIER_NAME(packed_gemm_q8_0_avx2)) {
  lane_gemm<Q8Quads>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(GLACIER_AVX2_TIER_NAME(packed_gemm_q8_0_block_sums_avx2)) {
  block_sum_gemm<Q8BlockSums>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(GLACIER_AVX2_TIER_NAME(packed_gemm_q4_0_avx2)) {
  lane_gemm<Q4Quads>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(GLACIER_AVX2_TIER_NAME(packed_gemm_q4_0_block_sums_avx2)) {
  block_sum_gemm<Q4BlockSums>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}

}  // namespace glacier::kernels
