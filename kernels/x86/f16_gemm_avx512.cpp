// AVX-512 F16 GEMM: a register tile of G weight rows x R activation rows, each f16 vector converted once
// and used by the whole tile. Per output it is exactly the F16 dot of dot_avx512.cpp (two 16-lane
// accumulators over 32-element steps, a masked tail into the first, then their sum reduced), so the
// tile shape cannot change a bit.
#include <immintrin.h>

#include "kernels/dispatch.h"

#include "kernels/x86/gcc_undefined_vector_warning.h"

namespace glacier::kernels {

namespace {

constexpr int kStep = 32;  // elements a step: two 16-lane vectors
// Bytes ahead each weight row prefetches when the tile streams it from memory (decode); about the
// distance the packed GEMM found best (6 blocks of its 544 bytes).
constexpr int64_t kPrefetchBytes = 3072;

inline __m512 load16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline __m512 load_tail(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

template <int G, int R, bool kPrefetch>
void tile(const uint8_t* w, size_t w_row_bytes, int64_t o0, int64_t n, const uint8_t* x, size_t x_row_bytes, int64_t r0,
          float* y, int64_t ldy) {
  const uint16_t* wr[G];
  const uint16_t* xr[R];
  for (int g = 0; g < G; ++g) wr[g] = reinterpret_cast<const uint16_t*>(w + (o0 + g) * w_row_bytes);
  for (int r = 0; r < R; ++r) xr[r] = reinterpret_cast<const uint16_t*>(x + (r0 + r) * x_row_bytes);
  __m512 acc0[G][R], acc1[G][R];
  for (int g = 0; g < G; ++g)
    for (int r = 0; r < R; ++r) acc0[g][r] = acc1[g][r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    __m512 w0[G], w1[G];
    for (int g = 0; g < G; ++g) {
      if (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(wr[g] + i) + kPrefetchBytes, _MM_HINT_T0);
      w0[g] = load16(wr[g] + i);
      w1[g] = load16(wr[g] + i + 16);
    }
    for (int r = 0; r < R; ++r) {
      const __m512 x0 = load16(xr[r] + i), x1 = load16(xr[r] + i + 16);
      for (int g = 0; g < G; ++g) {
        acc0[g][r] = _mm512_fmadd_ps(w0[g], x0, acc0[g][r]);
        acc1[g][r] = _mm512_fmadd_ps(w1[g], x1, acc1[g][r]);
      }
    }
  }
  for (; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    for (int r = 0; r < R; ++r) {
      const __m512 xt = load_tail(xr[r] + i, m);
      for (int g = 0; g < G; ++g) acc0[g][r] = _mm512_fmadd_ps(load_tail(wr[g] + i, m), xt, acc0[g][r]);
    }
  }
  for (int g = 0; g < G; ++g)
    for (int r = 0; r < R; ++r) y[(r0 + r) * ldy + o0 + g] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[g][r], acc1[g][r]));
}

// Rows of x in tiles of up to R for G weight rows starting at o0; the first tile prefetches.
template <int G>
void rows_of(const uint8_t* w, size_t w_row_bytes, int64_t o0, int64_t n, const uint8_t* x, size_t x_row_bytes,
             int64_t n_rows, float* y, int64_t ldy) {
  constexpr int kRows = 4;
  int64_t r = 0;
  if (n_rows >= kRows) {
    tile<G, kRows, true>(w, w_row_bytes, o0, n, x, x_row_bytes, 0, y, ldy);
    r = kRows;
  }
  for (; r + kRows <= n_rows; r += kRows) tile<G, kRows, false>(w, w_row_bytes, o0, n, x, x_row_bytes, r, y, ldy);
  for (; r < n_rows; ++r) {
    if (r == 0) {
      tile<G, 1, true>(w, w_row_bytes, o0, n, x, x_row_bytes, r, y, ldy);
    } else {
      tile<G, 1, false>(w, w_row_bytes, o0, n, x, x_row_bytes, r, y, ldy);
    }
  }
}

}  // namespace

void f16_gemm_avx512(const uint8_t* w, size_t w_row_bytes, int64_t o_begin, int64_t o_end, int64_t n, const uint8_t* x,
                     size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  constexpr int kGroup = 3;  // weight rows a tile: 2 x 3 x 4 accumulators
  int64_t o = o_begin;
  for (; o + kGroup <= o_end; o += kGroup) rows_of<kGroup>(w, w_row_bytes, o, n, x, x_row_bytes, n_rows, y, ldy);
  for (; o < o_end; ++o) rows_of<1>(w, w_row_bytes, o, n, x, x_row_bytes, n_rows, y, ldy);
}

}  // namespace glacier::kernels
