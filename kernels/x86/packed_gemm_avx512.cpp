// AVX-512 packed GEMM (layouts and orders in packed_gemm.h), built with and without VNNI (isa_tier.h):
// register tiles of G groups (16 weight rows each) x R activation rows. dpbusd gives one quad's exact
// integer sum for 16 weight rows at once; block-sum order adds the eight quads before one convert and
// fma, lane order keeps eight accumulators. Without VNNI the Q8_0 quads take the sign trick (|w| times x
// with w's sign) so the emulated dpbusd cannot saturate; the offset layouts would (255 * 127 * 2 > 32767).
#include <immintrin.h>

#include "kernels/x86/gcc_undefined_vector_warning.h"

#include "kernels/packed_gemm.h"
#include "kernels/x86/isa_tier.h"

namespace glacier::kernels {

namespace {

using x86::dpbusd;

constexpr int kQuadBytes = 4;
constexpr int kLaneBytes = kPackRows * kQuadBytes;

inline __m512i load_zmm(const uint8_t* p) { return _mm512_loadu_si512(p); }
inline __m512i broadcast_quad(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}

// dpbusd(acc, |w|, x with w's sign) = acc + the signed quad dots of w and x: exact emulated too, as
// |w| <= 128 and |x| <= 127 (quantized activations) keep a pair sum within 2 * 128 * 127.
inline __m512i signed_quad_dots(__m512i acc, __m512i w, __m512i x) {
  const __m512i signed_x = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
  return dpbusd(acc, _mm512_abs_epi8(w), signed_x);
}

// Block sums: adds one block's products to acc[g][r] (each starts as the activation's block correction
// where kCorrected, else zero). Nibbles u <= 15: no pair sum near the int16 limit.
struct Q4Quads {
  static constexpr WeightType kType = WeightType::Q4_0;
  static constexpr bool kCorrected = true;  // the correction takes the 8 off the nibbles
  template <int G, int R>
  static void accumulate(const uint8_t* const (&wb)[G], const int8_t* const (&xb)[R], __m512i (&acc)[G][R]) {
    const __m512i low_mask = _mm512_set1_epi8(0x0f);
    for (int j = 0; j < kQK4_0 / 2 / kQuadBytes; ++j) {
      __m512i lo[G], hi[G], xlo[R], xhi[R];
      for (int g = 0; g < G; ++g) {
        const __m512i raw = load_zmm(wb[g] + j * kLaneBytes);
        lo[g] = _mm512_and_si512(raw, low_mask);
        hi[g] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low_mask);
      }
      for (int r = 0; r < R; ++r) {
        xlo[r] = broadcast_quad(xb[r] + j * kQuadBytes);
        xhi[r] = broadcast_quad(xb[r] + 16 + j * kQuadBytes);
      }
      for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) {
          acc[g][r] = dpbusd(acc[g][r], lo[g], xlo[r]);
          acc[g][r] = dpbusd(acc[g][r], hi[g], xhi[r]);
        }
    }
  }
};

// Block-sum Q8_0: weights stored + 128 (unsigned), activations signed. With VNNI the block correction
// takes the 128 off, so a block is eight dpbusd per output and nothing else; without, the weights go
// back to signed for the sign trick, which needs no correction.
struct Q8OffsetQuads {
  static constexpr WeightType kType = WeightType::Q8_0;
  static constexpr bool kCorrected = GLACIER_X86_VNNI;
  template <int G, int R>
  static void accumulate(const uint8_t* const (&wb)[G], const int8_t* const (&xb)[R], __m512i (&acc)[G][R]) {
    for (int q = 0; q < kQuadsPerBlock; ++q) {
      __m512i wq[G], xq[R];
      for (int g = 0; g < G; ++g) wq[g] = load_zmm(wb[g] + q * kLaneBytes);
      for (int r = 0; r < R; ++r) xq[r] = broadcast_quad(xb[r] + q * kQuadBytes);
      for (int g = 0; g < G; ++g)
        for (int r = 0; r < R; ++r) {
#if GLACIER_X86_VNNI
          acc[g][r] = dpbusd(acc[g][r], wq[g], xq[r]);
#else
          acc[g][r] = signed_quad_dots(acc[g][r], _mm512_xor_si512(wq[g], _mm512_set1_epi8(static_cast<char>(0x80))), xq[r]);
#endif
        }
    }
  }
};

// Blocks ahead that decode prefetches: the hardware prefetcher alone left a single thread at about 60%
// of the read bandwidth on weights streaming from memory; 4 to 12 blocks ahead all reach about 85%
// (bench_kernels packed/.../65536x4096), 6 was best.
constexpr int64_t kPrefetchBlocks = 6;

// The quads of block b + kPrefetchBlocks of a group (wb: block b's) and, every other block, the 64
// bytes of scales that cover it and the next one. Both prefetch helpers are always inlined: GCC 12 deletes
// a call it did not inline to a function of nothing but prefetches (it finds it pure).
[[gnu::always_inline]] inline void prefetch_ahead(const uint8_t* wb, const uint16_t* wscale, int64_t b,
                                                  size_t quad_bytes) {
  for (size_t off = 0; off < quad_bytes; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(wb + kPrefetchBlocks * quad_bytes + off), _MM_HINT_T0);
  if (b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(wscale + (b + kPrefetchBlocks) * kPackRows), _MM_HINT_T0);
}

// While a batch computes a group from the caches, the second row tile brings the next group's block b
// into L2 (not L1, where it would push out the group in use): the weight stream then overlaps that
// arithmetic instead of stalling the next group's first tile (8 rows from memory: 15-25% faster; spread
// over the first three tiles, or over the second and third, it gained less).
[[gnu::always_inline]] inline void prefetch_next_group(const uint8_t* next, const uint16_t* next_scale, int64_t b,
                                                       size_t quad_bytes) {
  for (size_t off = 0; off < quad_bytes; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(next + b * quad_bytes + off), _MM_HINT_T1);
  if (b % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(next_scale + b * kPackRows), _MM_HINT_T1);
}

// Where a tile's G groups (their quads and scales) and R activation rows start.
template <int G, int R>
struct TileSources {
  const uint8_t* group[G];
  const uint16_t* wscale[G];
  PackedActivationRow a[R];
  TileSources(WeightType type, const uint8_t* w, size_t group_bytes, int64_t cols, int64_t g0, const uint8_t* x,
              size_t x_row_bytes, int64_t r0) {
    for (int g = 0; g < G; ++g) {
      group[g] = w + (g0 + g) * group_bytes;
      wscale[g] = packed_group_scales(type, group[g], cols);
    }
    for (int r = 0; r < R; ++r) a[r] = packed_activation_row(x + (r0 + r) * x_row_bytes, cols);
  }
};

// Groups [g0, g0 + G) x activation rows [r0, r0 + R), block sums; kPrefetch: the tile that first reads
// the groups from memory; next: the G groups after them, to bring into L2 meanwhile, or null.
template <class Quads, int G, int R, bool kPrefetch>
void tile(const uint8_t* w, size_t group_bytes, int64_t cols, int64_t rows, int64_t g0, const uint8_t* x,
          size_t x_row_bytes, int64_t r0, float* y, int64_t ldy, const uint8_t* next = nullptr) {
  const int64_t nb = cols / kQK8_0;
  const size_t quad_bytes = packed_block_quad_bytes(Quads::kType);
  const uint16_t* next_scale[G];
  for (int g = 0; g < G; ++g) next_scale[g] = next ? packed_group_scales(Quads::kType, next + g * group_bytes, cols) : nullptr;
  const TileSources<G, R> src(Quads::kType, w, group_bytes, cols, g0, x, x_row_bytes, r0);
  const auto& group = src.group;
  const auto& wscale = src.wscale;
  const auto& a = src.a;
  __m512 facc[G][R];
  for (int g = 0; g < G; ++g)
    for (int r = 0; r < R; ++r) facc[g][r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb[G];
    const int8_t* xb[R];
    __m512i acc[G][R];
    for (int g = 0; g < G; ++g) {
      wb[g] = group[g] + b * quad_bytes;
      if (kPrefetch) prefetch_ahead(wb[g], wscale[g], b, quad_bytes);
      if (next) prefetch_next_group(next + g * group_bytes, next_scale[g], b, quad_bytes);
    }
    for (int r = 0; r < R; ++r) {
      xb[r] = a[r].quants + b * kQK8_0;
      const __m512i correction = Quads::kCorrected ? _mm512_set1_epi32(a[r].block_corrections[b]) : _mm512_setzero_si512();
      for (int g = 0; g < G; ++g) acc[g][r] = correction;
    }
    Quads::template accumulate<G, R>(wb, xb, acc);
    __m512 dw[G];
    for (int g = 0; g < G; ++g)
      dw[g] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wscale[g] + b * kPackRows)));
    for (int r = 0; r < R; ++r) {
      const __m512 dx = _mm512_set1_ps(a[r].scales[b]);
      for (int g = 0; g < G; ++g)
        facc[g][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[g][r]), _mm512_mul_ps(dw[g], dx), facc[g][r]);
    }
  }
  for (int g = 0; g < G; ++g) {
    const int64_t first = (g0 + g) * kPackRows;
    const int64_t valid = rows - first < kPackRows ? rows - first : kPackRows;
    const __mmask16 m = valid >= kPackRows ? __mmask16(0xffff) : __mmask16((1u << valid) - 1);
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + (r0 + r) * ldy + first, m, facc[g][r]);
  }
}

// Row tiles of up to kRows for a fixed group count; next: the G groups after these (null: none).
template <class Quads, int G>
void rows_of(const uint8_t* w, size_t group_bytes, int64_t cols, int64_t rows, int64_t g0, const uint8_t* x,
             size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy, const uint8_t* next) {
  constexpr int kRows = 4;
  int64_t r = 0;
  if (n_rows >= kRows) {  // the first tile streams the groups from memory, the second brings the next ones
    tile<Quads, G, kRows, true>(w, group_bytes, cols, rows, g0, x, x_row_bytes, 0, y, ldy);
    r = kRows;
  }
  for (; r + kRows <= n_rows; r += kRows)
    tile<Quads, G, kRows, false>(w, group_bytes, cols, rows, g0, x, x_row_bytes, r, y, ldy, r == kRows ? next : nullptr);
  const bool first = r == 0;
  const uint8_t* rest_next = r == kRows ? next : nullptr;
  switch (n_rows - r) {
    case 3: first ? tile<Quads, G, 3, true>(w, group_bytes, cols, rows, g0, x, x_row_bytes, r, y, ldy)
                  : tile<Quads, G, 3, false>(w, group_bytes, cols, rows, g0, x, x_row_bytes, r, y, ldy, rest_next); break;
    case 2: first ? tile<Quads, G, 2, true>(w, group_bytes, cols, rows, g0, x, x_row_bytes, r, y, ldy)
                  : tile<Quads, G, 2, false>(w, group_bytes, cols, rows, g0, x, x_row_bytes, r, y, ldy, rest_next); break;
    case 1: first ? tile<Quads, G, 1, true>(w, group_bytes, cols, rows, g0, x, x_row_bytes, r, y, ldy)
                  : tile<Quads, G, 1, false>(w, group_bytes, cols, rows, g0, x, x_row_bytes, r, y, ldy, rest_next); break;
    default: break;
  }
}

template <class Quads>
void packed_gemm(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end, const uint8_t* x,
                 size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  const size_t group_bytes = packed_group_bytes(Quads::kType, cols);
  // Decode (one or two rows) is bound by reading the weights: four groups at once keep more loads and
  // independent dpbusd chains in flight. Batches share each loaded weight quad among four rows.
  if (n_rows <= 2) {
    int64_t g = g_begin;
    for (; g + 4 <= g_end; g += 4) rows_of<Quads, 4>(w, group_bytes, cols, rows, g, x, x_row_bytes, n_rows, y, ldy, nullptr);
    for (; g < g_end; ++g) rows_of<Quads, 1>(w, group_bytes, cols, rows, g, x, x_row_bytes, n_rows, y, ldy, nullptr);
    return;
  }
  int64_t g = g_begin;
  for (; g + 2 <= g_end; g += 2)
    rows_of<Quads, 2>(w, group_bytes, cols, rows, g, x, x_row_bytes, n_rows, y, ldy,
                      g + 4 <= g_end ? w + (g + 2) * group_bytes : nullptr);
  if (g < g_end) rows_of<Quads, 1>(w, group_bytes, cols, rows, g, x, x_row_bytes, n_rows, y, ldy, nullptr);
}

// Lane order: quad q of block b goes to acc[g][r][q] = fma(float(isum_q), d, acc[g][r][q]).
struct Q8Lanes {
  static constexpr WeightType kType = WeightType::Q8_0;
  template <int G, int R>
  static void block(const uint8_t* const (&wb)[G], const int8_t* const (&xb)[R], const int32_t* const (&corr)[R],
                    const __m512 (&d)[G][R], __m512 (&acc)[G][R][kQuadsPerBlock]) {
    (void)corr;  // Q8_0 activations need none: the offset is on their side, the correction from the weights
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80)), zero = _mm512_setzero_si512();
    for (int q = 0; q < kQuadsPerBlock; ++q) {
      __m512i wq[G], start[G];
      for (int g = 0; g < G; ++g) {
        wq[g] = load_zmm(wb[g] + q * kLaneBytes);
        // -128 * (sum of each row's weight quad), once for all activation rows.
        start[g] = GLACIER_X86_VNNI ? _mm512_sub_epi32(zero, dpbusd(zero, offset, wq[g])) : zero;
      }
      for (int r = 0; r < R; ++r) {
        const __m512i xq = broadcast_quad(xb[r] + q * kQuadBytes);
        for (int g = 0; g < G; ++g) {
#if GLACIER_X86_VNNI
          const __m512i isum = dpbusd(start[g], xq, wq[g]);
#else  // x + 128 (up to 255) against w could saturate: back to signed x and the sign trick
          const __m512i isum = signed_quad_dots(start[g], wq[g], _mm512_xor_si512(xq, offset));
#endif
          acc[g][r][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d[g][r], acc[g][r][q]);
        }
      }
    }
  }
};

struct Q4Lanes {
  static constexpr WeightType kType = WeightType::Q4_0;
  template <int G, int R>
  static void block(const uint8_t* const (&wb)[G], const int8_t* const (&xb)[R], const int32_t* const (&corr)[R],
                    const __m512 (&d)[G][R], __m512 (&acc)[G][R][kQuadsPerBlock]) {
    const __m512i low_mask = _mm512_set1_epi8(0x0f);
    for (int j = 0; j < kQuadsPerBlock / 2; ++j) {
      __m512i lo[G], hi[G];
      for (int g = 0; g < G; ++g) {
        const __m512i raw = load_zmm(wb[g] + j * kLaneBytes);
        lo[g] = _mm512_and_si512(raw, low_mask);
        hi[g] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low_mask);
      }
      for (int r = 0; r < R; ++r) {
        const __m512i xlo = broadcast_quad(xb[r] + j * kQuadBytes), xhi = broadcast_quad(xb[r] + 16 + j * kQuadBytes);
        const __m512i clo = _mm512_set1_epi32(corr[r][j]), chi = _mm512_set1_epi32(corr[r][j + 4]);
        for (int g = 0; g < G; ++g) {
          acc[g][r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dpbusd(clo, lo[g], xlo)), d[g][r], acc[g][r][j]);
          acc[g][r][j + 4] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(dpbusd(chi, hi[g], xhi)), d[g][r], acc[g][r][j + 4]);
        }
      }
    }
  }
};

// dot_ref.cpp's hsum8 tree, lane by lane over the eight accumulators.
inline __m512 tree8(const __m512 (&a)[kQuadsPerBlock]) {
  return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[4], a[0]), _mm512_add_ps(a[6], a[2])),
                       _mm512_add_ps(_mm512_add_ps(a[5], a[1]), _mm512_add_ps(a[7], a[3])));
}


// Groups [g0, g0 + G) x activation rows [r0, r0 + R), lane order (8 G R accumulators: G * R <= 3).
// kPrefetch: the tile that first reads a group from memory (each later row tile finds it in the caches).
// next: the group to bring into L2 meanwhile (prefetch_next_group), or null.
template <class Lanes, int G, int R, bool kPrefetch>
void lane_tile(const uint8_t* w, size_t group_bytes, int64_t cols, int64_t rows, int64_t g0, const uint8_t* x,
               size_t x_row_bytes, int64_t r0, float* y, int64_t ldy, const uint8_t* next = nullptr) {
  const int64_t nb = cols / kQK8_0;
  const size_t quad_bytes = packed_block_quad_bytes(Lanes::kType);
  const uint16_t* next_scale = next ? packed_group_scales(Lanes::kType, next, cols) : nullptr;
  const TileSources<G, R> src(Lanes::kType, w, group_bytes, cols, g0, x, x_row_bytes, r0);
  const auto& group = src.group;
  const auto& wscale = src.wscale;
  const auto& a = src.a;
  __m512 acc[G][R][kQuadsPerBlock];
  for (int g = 0; g < G; ++g)
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < kQuadsPerBlock; ++q) acc[g][r][q] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb[G];
    const int8_t* xb[R];
    const int32_t* corr[R];
    __m512 d[G][R];
    for (int g = 0; g < G; ++g) {
      wb[g] = group[g] + b * quad_bytes;
      if (kPrefetch) prefetch_ahead(wb[g], wscale[g], b, quad_bytes);
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wscale[g] + b * kPackRows)));
      for (int r = 0; r < R; ++r) d[g][r] = _mm512_mul_ps(dw, _mm512_set1_ps(a[r].scales[b]));
    }
    if (next) prefetch_next_group(next, next_scale, b, quad_bytes);
    for (int r = 0; r < R; ++r) {
      xb[r] = a[r].quants + b * kQK8_0;
      corr[r] = a[r].quad_corrections + b * kQuadsPerBlock;
    }
    Lanes::template block<G, R>(wb, xb, corr, d, acc);
  }
  for (int g = 0; g < G; ++g) {
    const int64_t first = (g0 + g) * kPackRows;
    const int64_t valid = rows - first < kPackRows ? rows - first : kPackRows;
    const __mmask16 m = valid >= kPackRows ? __mmask16(0xffff) : __mmask16((1u << valid) - 1);
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + (r0 + r) * ldy + first, m, tree8(acc[g][r]));
  }
}

template <class Lanes>
void lane_gemm(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end, const uint8_t* x,
               size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  const size_t group_bytes = packed_group_bytes(Lanes::kType, cols);
  if (n_rows == 1) {  // decode: two groups at a time keep more weight loads in flight
    int64_t g = g_begin;
    for (; g + 2 <= g_end; g += 2) lane_tile<Lanes, 2, 1, true>(w, group_bytes, cols, rows, g, x, x_row_bytes, 0, y, ldy);
    if (g < g_end) lane_tile<Lanes, 1, 1, true>(w, group_bytes, cols, rows, g, x, x_row_bytes, 0, y, ldy);
    return;
  }
  // Batches: one group against three rows at a time (24 accumulators): each weight quad loaded serves
  // three rows (measured 7% faster than two on prefill batches); a last tile of the one or two rows left.
  // The first tile streams the group from memory (it prefetches); the others find it in L1/L2, and the
  // second brings the next group.
  const int64_t full_tiles = n_rows / 3, rest = n_rows % 3;
  for (int64_t g = g_begin; g < g_end; ++g) {
    const uint8_t* next = g + 1 < g_end ? w + (g + 1) * group_bytes : nullptr;
    for (int64_t k = 0; k < full_tiles; ++k) {
      if (k == 0)
        lane_tile<Lanes, 1, 3, true>(w, group_bytes, cols, rows, g, x, x_row_bytes, 0, y, ldy);
      else
        lane_tile<Lanes, 1, 3, false>(w, group_bytes, cols, rows, g, x, x_row_bytes, 3 * k, y, ldy, k == 1 ? next : nullptr);
    }
    const int64_t r = 3 * full_tiles;
    const uint8_t* rest_next = full_tiles == 1 ? next : nullptr;  // the rest's tile is the second
    if (rest == 2)
      full_tiles == 0 ? lane_tile<Lanes, 1, 2, true>(w, group_bytes, cols, rows, g, x, x_row_bytes, r, y, ldy)
                      : lane_tile<Lanes, 1, 2, false>(w, group_bytes, cols, rows, g, x, x_row_bytes, r, y, ldy, rest_next);
    if (rest == 1)  // n_rows > 1 here: a one-row rest follows a full tile
      lane_tile<Lanes, 1, 1, false>(w, group_bytes, cols, rows, g, x, x_row_bytes, r, y, ldy, rest_next);
  }
}

}  // namespace

GLACIER_PACKED_GEMM(GLACIER_AVX512_TIER_NAME(packed_gemm_q8_0_avx512)) {
  lane_gemm<Q8Lanes>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(GLACIER_AVX512_TIER_NAME(packed_gemm_q8_0_block_sums_avx512)) {
  packed_gemm<Q8OffsetQuads>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(GLACIER_AVX512_TIER_NAME(packed_gemm_q4_0_avx512)) {
  lane_gemm<Q4Lanes>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(GLACIER_AVX512_TIER_NAME(packed_gemm_q4_0_block_sums_avx512)) {
  packed_gemm<Q4Quads>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}

}  // namespace glacier::kernels
