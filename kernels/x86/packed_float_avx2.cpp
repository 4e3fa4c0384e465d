// AVX2 + F16C + FMA GEMM of packed F16/BF16 weights (packed_float.h): a group's 16 outputs are two ymm
// of one column, each activation element is broadcast against them. Batches run up to 6 activation rows
// x 16 outputs a register tile (12 accumulators) over spans of k, the activations prepared tile by tile
// (packed_float.h) so the broadcasts read one stream; a single row streams four groups at once (8 FMA
// chains). Each output is one fma chain over k from zero, so every path equals the scalar twin bit for bit.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/packed_float.h"
#include "kernels/x86/lanes_256.h"

namespace glacier::kernels {

namespace {

static_assert(kFloatTileRows == 6, "tile_rows has a case for each tile height up to kFloatTileRows");
constexpr int kDecodeGroups = 4;  // groups a single-row pass streams side by side
constexpr int kLanes = 8;

struct F16Columns {
  static __m256 widen(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};
struct Bf16Columns {
  static __m256 widen(const uint16_t* p) { return widen_bf16x8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};

// R packed activation rows (xt[k * R + r]) x one group's 16 outputs over `len` columns (col and xt
// at the span's first k); c[r * ldc + lane] holds the sums so far unless `first`, and takes them back.
template <class Columns, int R>
[[gnu::always_inline]] inline void tile(const uint16_t* col, const float* xt, int64_t len, float* c, int64_t ldc,
                                        bool first) {
  // Every loop over the tile's rows is unrolled by pragma: GCC 12 otherwise kept lo and hi on the stack,
  // storing each accumulator on every k (measured 2.2x slower).
  __m256 lo[R], hi[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    lo[r] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + r * ldc);
    hi[r] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(c + r * ldc + kLanes);
  }
  for (int64_t k = 0; k < len; ++k, col += kPackRows, xt += R) {
    const __m256 w_lo = Columns::widen(col), w_hi = Columns::widen(col + kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 xb = _mm256_broadcast_ss(xt + r);
      lo[r] = _mm256_fmadd_ps(w_lo, xb, lo[r]);
      hi[r] = _mm256_fmadd_ps(w_hi, xb, hi[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(c + r * ldc, lo[r]);
    _mm256_storeu_ps(c + r * ldc + kLanes, hi[r]);
  }
}

template <class Columns>
void tile_rows(int rows, const uint16_t* col, const float* xt, int64_t len, float* c, int64_t ldc, bool first) {
  switch (rows) {
    case 6: return tile<Columns, 6>(col, xt, len, c, ldc, first);
    case 5: return tile<Columns, 5>(col, xt, len, c, ldc, first);
    case 4: return tile<Columns, 4>(col, xt, len, c, ldc, first);
    case 3: return tile<Columns, 3>(col, xt, len, c, ldc, first);
    case 2: return tile<Columns, 2>(col, xt, len, c, ldc, first);
    default: return tile<Columns, 1>(col, xt, len, c, ldc, first);
  }
}

// One activation row against groups [g, g + D): 2D fma chains side by side, the columns streamed.
template <class Columns, int D>
void row_groups(const uint16_t* const* cols, const float* x, int64_t n, float* out /* D * 16 */) {
  __m256 acc[2 * D];
#pragma GCC unroll 8
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (int64_t k = 0; k < n; ++k) {
    const __m256 xb = _mm256_broadcast_ss(x + k);
#pragma GCC unroll 8
    for (int d = 0; d < D; ++d) {
      const uint16_t* p = cols[d] + k * kPackRows;
      acc[2 * d] = _mm256_fmadd_ps(Columns::widen(p), xb, acc[2 * d]);
      acc[2 * d + 1] = _mm256_fmadd_ps(Columns::widen(p + kLanes), xb, acc[2 * d + 1]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < 2 * D; ++i) _mm256_storeu_ps(out + i * kLanes, acc[i]);
}

template <class Columns>
void single_row(const uint8_t* w, size_t group_bytes, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end,
                const float* x, float* y) {
  for (int64_t g = g_begin; g < g_end; g += kDecodeGroups) {
    const int d = static_cast<int>(std::min<int64_t>(kDecodeGroups, g_end - g));
    const uint16_t* col[kDecodeGroups];
    for (int i = 0; i < d; ++i) col[i] = reinterpret_cast<const uint16_t*>(w + static_cast<size_t>(g + i) * group_bytes);
    alignas(32) float out[kDecodeGroups * kPackRows];
    switch (d) {
      case 4: row_groups<Columns, 4>(col, x, cols, out); break;
      case 3: row_groups<Columns, 3>(col, x, cols, out); break;
      case 2: row_groups<Columns, 2>(col, x, cols, out); break;
      default: row_groups<Columns, 1>(col, x, cols, out); break;
    }
    const int64_t valid = std::min<int64_t>(int64_t{d} * kPackRows, rows - g * kPackRows);
    std::memcpy(y + g * kPackRows, out, sizeof(float) * static_cast<size_t>(valid));
  }
}

template <class Columns>
void gemm(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end, const uint8_t* x,
          int64_t n_rows, float* y, int64_t ldy) {
  if (g_begin >= g_end || n_rows <= 0) return;
  const size_t group_bytes = float_packed_group_bytes(cols);
  if (n_rows == 1) return single_row<Columns>(w, group_bytes, cols, rows, g_begin, g_end, reinterpret_cast<const float*>(x), y);
  if (cols == 0) {  // empty sums: no span runs
    for (int64_t r = 0; r < n_rows; ++r)
      std::fill(y + r * ldy + g_begin * kPackRows, y + r * ldy + std::min(rows, g_end * kPackRows), 0.0f);
    return;
  }
  thread_local std::vector<float> edge;  // the sums of a group past the matrix's last row (its 16 lanes)
  const auto* xs = reinterpret_cast<const float*>(x);  // tiled as packed_float.h lays them out
  const int64_t last = g_end - 1;
  const bool partial_last = rows - last * kPackRows < kPackRows;
  if (partial_last && edge.size() < static_cast<size_t>(n_rows * kPackRows)) edge.resize(static_cast<size_t>(n_rows * kPackRows));
  for (int64_t k0 = 0; k0 < cols; k0 += kFloatSpan) {
    const int64_t len = std::min(kFloatSpan, cols - k0);
    for (int64_t r0 = 0; r0 < n_rows; r0 += kFloatRowBlock) {
      const int64_t block_rows = std::min(kFloatRowBlock, n_rows - r0);
      const float* span = xs + r0 * cols + k0 * block_rows;
      const FloatRowTiles tiles(block_rows);
      for (int64_t g = g_begin; g < g_end; ++g) {
        const auto* col = reinterpret_cast<const uint16_t*>(w + static_cast<size_t>(g) * group_bytes) + k0 * kPackRows;
        const bool to_edge = partial_last && g == last;
        float* c = to_edge ? edge.data() + r0 * kPackRows : y + r0 * ldy + g * kPackRows;
        const int64_t ldc = to_edge ? kPackRows : ldy;
        for (int64_t t = 0; t < tiles.count; ++t)
          tile_rows<Columns>(tiles.rows(t), col, span + tiles.first(t) * len, len, c + tiles.first(t) * ldc, ldc, k0 == 0);
      }
    }
  }
  if (partial_last) {
    const int64_t lanes = rows - last * kPackRows;
    for (int64_t r = 0; r < n_rows; ++r)
      std::memcpy(y + r * ldy + last * kPackRows, edge.data() + r * kPackRows, sizeof(float) * static_cast<size_t>(lanes));
  }
}

}  // namespace

// x_row_bytes is cols floats: the activations are tiled (packed_float.h), one row a plain row.
GLACIER_PACKED_GEMM(packed_gemm_f16_avx2) {
  (void)x_row_bytes;
  gemm<F16Columns>(w, cols, rows, g_begin, g_end, x, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(packed_gemm_bf16_avx2) {
  (void)x_row_bytes;
  gemm<Bf16Columns>(w, cols, rows, g_begin, g_end, x, n_rows, y, ldy);
}

}  // namespace glacier::kernels
