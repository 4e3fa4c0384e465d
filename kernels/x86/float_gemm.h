// Register-tiled GEMM of float-like weight rows (F16, BF16) against prepared activation rows, shared by
// the AVX2 and AVX-512 sources. Every output is one accumulator of Ops::kStep elements a step (the last
// step's missing elements load as zero), then Ops::hsum: the same operations whatever the tile shape,
// so the single-row dot, the row tile and the GEMM of a variant agree bit for bit.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/x86/f16_kernels.h"

namespace glacier::kernels::x86::float_gemm {

// Ops (one per ISA and weight type, from the including file's anonymous namespace) provides:
//   using W, X       weight element, element of the prepared activation rows
//   using XB         element the tile reads: X itself, or float when kWidenX (rows widened once a tile)
//   using Acc, WV, XV  accumulator, loaded weight vector, loaded activation vector
//   kStep            elements an accumulator step takes
//   kGroup, kRows    the register tile (weight rows x activation rows) of prefill
//   kDecodeGroup     weight rows a tile when there is one activation row (decode streams the weights)
//   kWidenX          whether activation rows are widened to float before the tiles read them
//   zero(), load_w(p), load_w_tail(p, left), load_x(p), load_x_tail(p, left), madd(acc, w, x), hsum(acc)
//   widen_x(const X* src, int64_t n, float* dst)   (when kWidenX)

// Bytes ahead a weight row prefetches while a tile streams it from memory, one cache line at a time.
constexpr int64_t kPrefetchBytes = 1024;
constexpr int64_t kCacheLineBytes = 64;

// Prefetches kPrefetchBytes ahead of byte `at` of weight row `row` (row_bytes long); past the row's end,
// the same distance into `next`, the row the following tile reads in its place. A decode group streams
// short rows side by side (4 KB for a 2048-wide F16 row), so without the carry-over the first kilobyte
// of every row was a demand miss. On the Zen 5 VM, a stand-alone loop of two threads' GEMVs over a 1.1B
// model's F16 layer shapes read 30 GB/s without it and 41-42 with it (a plain read loop: 49-54); end to
// end the decode gain was within the machine's noise.
template <class W>
[[gnu::always_inline]] inline void prefetch_ahead(const W* row, const W* next, int64_t at, int64_t row_bytes) {
  const int64_t ahead = at + kPrefetchBytes;
  if (ahead < row_bytes || next == nullptr) {
    __builtin_prefetch(reinterpret_cast<const char*>(row) + ahead);
  } else {
    __builtin_prefetch(reinterpret_cast<const char*>(next) + (ahead - row_bytes));
  }
}

// Weight bytes a block: the block stays in L2 while every activation tile passes over it.
constexpr int64_t kBlockBytes = 512 << 10;

// Elements of k a prefill tile covers before the next weight group takes the same activation rows: the
// tile's activation slice (kRows x kChunk) stays in L1 while the weight block streams from L2. Splitting
// k only parks the accumulators in memory between spans, so the sums are the same.
constexpr int64_t kChunk = 512;

// Accumulators of a G x R tile over k in [k0, k1) (k0 a multiple of kStep; k1 == n takes the tail): started
// at zero when `state` is null, else loaded from state[g * R + r]; reduced into y[r * ldy + g] when y is
// set, else stored back into state. With kPrefetch, `next` (when set) names the rows the following tile
// reads, which the prefetch runs on into (prefetch_ahead).
template <class Ops, int G, int R, bool kPrefetch>
[[gnu::always_inline]] inline void tile_span(const typename Ops::W* const* w, const typename Ops::XB* const* x,
                                             int64_t k0, int64_t k1, int64_t n, typename Ops::Acc* load_from,
                                             typename Ops::Acc* store_to, float* y, int64_t ldy,
                                             const typename Ops::W* const* next = nullptr) {
  using W = typename Ops::W;
  const int64_t row_bytes = n * static_cast<int64_t>(sizeof(W));
  typename Ops::Acc acc[G][R];
  for (int g = 0; g < G; ++g)
    for (int r = 0; r < R; ++r) acc[g][r] = load_from ? load_from[g * R + r] : Ops::zero();
  auto step = [&](int64_t i) __attribute__((always_inline)) {
    typename Ops::WV wv[G];
    for (int g = 0; g < G; ++g) wv[g] = Ops::load_w(w[g] + i);
    for (int r = 0; r < R; ++r) {
      const typename Ops::XV xv = Ops::load_x(x[r] + i);
      for (int g = 0; g < G; ++g) acc[g][r] = Ops::madd(acc[g][r], wv[g], xv);
    }
  };
  int64_t i = k0;
  if constexpr (kPrefetch && R == 1) {
    // Decode: one prefetch a row per cache line read, not per step. At one a step (four a line for F16
    // on AVX2) the prefetches and their distance tests cost the decode tile more than they saved; a
    // batch tile spreads them over its activation rows, and there the line loop measured no faster.
    constexpr int64_t kLine = kCacheLineBytes / static_cast<int64_t>(sizeof(W));
    static_assert(kLine % Ops::kStep == 0, "a cache line holds whole steps");
    for (; i + kLine <= k1; i += kLine) {
      for (int g = 0; g < G; ++g)
        prefetch_ahead<W>(w[g], next ? next[g] : nullptr, i * static_cast<int64_t>(sizeof(W)), row_bytes);
      for (int64_t s = i; s < i + kLine; s += Ops::kStep) step(s);
    }
  }
  for (; i + Ops::kStep <= k1; i += Ops::kStep) {
    if constexpr (kPrefetch && R > 1)
      for (int g = 0; g < G; ++g)
        prefetch_ahead<W>(w[g], next ? next[g] : nullptr, i * static_cast<int64_t>(sizeof(W)), row_bytes);
    step(i);
  }
  if (i < k1 && k1 == n) {
    const int left = static_cast<int>(n - i);
    typename Ops::WV wv[G];
    for (int g = 0; g < G; ++g) wv[g] = Ops::load_w_tail(w[g] + i, left);
    for (int r = 0; r < R; ++r) {
      const typename Ops::XV xv = Ops::load_x_tail(x[r] + i, left);
      for (int g = 0; g < G; ++g) acc[g][r] = Ops::madd(acc[g][r], wv[g], xv);
    }
  }
  if (store_to) {
    for (int g = 0; g < G; ++g)
      for (int r = 0; r < R; ++r) store_to[g * R + r] = acc[g][r];
    return;
  }
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) y[r * ldy + g] = Ops::hsum(acc[g][r]);
}

// The whole of k at once.
template <class Ops, int G, int R, bool kPrefetch>
[[gnu::always_inline]] inline void tile(const typename Ops::W* const* w, const typename Ops::XB* const* x, int64_t n,
                                        float* y, int64_t ldy, const typename Ops::W* const* next = nullptr) {
  tile_span<Ops, G, R, kPrefetch>(w, x, 0, n, n, nullptr, nullptr, y, ldy, next);
}

// A span (tile_span) of G weight rows against nr (1..Ops::kRows) activation rows.
template <class Ops, int G, bool kPrefetch>
void span_rows(int nr, const typename Ops::W* const* w, const typename Ops::XB* const* x, int64_t k0, int64_t k1,
               int64_t n, typename Ops::Acc* load_from, typename Ops::Acc* store_to, float* y, int64_t ldy) {
  static_assert(Ops::kRows >= 1 && Ops::kRows <= 8, "span_rows covers 1 to 8 activation rows");
  switch (nr) {
#define GLACIER_FLOAT_GEMM_CASE(k)                                                                               \
  case k:                                                                                                        \
    if constexpr (k <= Ops::kRows) tile_span<Ops, G, k, kPrefetch>(w, x, k0, k1, n, load_from, store_to, y, ldy); \
    return;
    GLACIER_FLOAT_GEMM_CASE(1)
    GLACIER_FLOAT_GEMM_CASE(2)
    GLACIER_FLOAT_GEMM_CASE(3)
    GLACIER_FLOAT_GEMM_CASE(4)
    GLACIER_FLOAT_GEMM_CASE(5)
    GLACIER_FLOAT_GEMM_CASE(6)
    GLACIER_FLOAT_GEMM_CASE(7)
    GLACIER_FLOAT_GEMM_CASE(8)
#undef GLACIER_FLOAT_GEMM_CASE
    default: return;
  }
}

// The activation rows a tile reads: widened into a per-thread buffer when Ops::kWidenX, else in place.
template <class Ops>
class ActivationTile {
 public:
  using X = typename Ops::X;
  using XB = typename Ops::XB;
  ActivationTile(const uint8_t* x, size_t x_row_bytes, int64_t n) : x_(x), row_bytes_(x_row_bytes), n_(n) {
    if constexpr (Ops::kWidenX) {
      thread_local std::vector<float> buffer;
      const size_t need = static_cast<size_t>(Ops::kRows > 4 ? Ops::kRows : 4) * static_cast<size_t>(n);
      if (buffer.size() < need) buffer.resize(need);
      buffer_ = buffer.data();
    }
  }
  // Rows r0 .. r0 + nr - 1 (nr <= max(Ops::kRows, 4)) into rows[].
  void load(int64_t r0, int nr, const XB** rows) {
    for (int r = 0; r < nr; ++r) {
      const X* src = reinterpret_cast<const X*>(x_ + static_cast<size_t>(r0 + r) * row_bytes_);
      if constexpr (Ops::kWidenX) {
        float* dst = buffer_ + static_cast<size_t>(r) * static_cast<size_t>(n_);
        Ops::widen_x(src, n_, dst);
        rows[r] = dst;
      } else {
        rows[r] = src;
      }
    }
  }

 private:
  const uint8_t* x_;
  size_t row_bytes_;
  int64_t n_;
  float* buffer_ = nullptr;
};

// Weight rows [o_begin, o_end) (w_row_bytes apart, n elements each) against n_rows activation rows
// (x_row_bytes apart): y[r * ldy + o]. With one activation row the weights stream from memory in
// groups of kDecodeGroup rows; with more, blocks of weight rows stay in L2 while the activation rows pass
// over them in tiles of kRows, kGroup weight rows at a time.
template <class Ops>
void gemm(const uint8_t* w, size_t w_row_bytes, int64_t o_begin, int64_t o_end, int64_t n, const uint8_t* x,
          size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  using W = typename Ops::W;
  using XB = typename Ops::XB;
  if (o_begin >= o_end || n_rows <= 0) return;
  auto wrow = [&](int64_t o) { return reinterpret_cast<const W*>(w + static_cast<size_t>(o) * w_row_bytes); };
  ActivationTile<Ops> act(x, x_row_bytes, n);
  const XB* xs[Ops::kRows > 4 ? Ops::kRows : 4];
  if (n_rows == 1) {
    act.load(0, 1, xs);
    constexpr int D = Ops::kDecodeGroup;
    int64_t o = o_begin;
    for (; o + D <= o_end; o += D) {
      const W* ws[D];
      const W* next[D];  // the next group's rows, or the last row again where the range ends
      for (int g = 0; g < D; ++g) {
        ws[g] = wrow(o + g);
        next[g] = wrow(std::min(o_end - 1, o + D + g));
      }
      tile<Ops, D, 1, true>(ws, xs, n, y + o, ldy, next);
    }
    for (; o < o_end; ++o) {
      const W* ws[1] = {wrow(o)};
      tile<Ops, 1, 1, true>(ws, xs, n, y + o, ldy);
    }
    return;
  }
  constexpr int G = Ops::kGroup;
  using Acc = typename Ops::Acc;
  const int64_t block = std::max<int64_t>(G, kBlockBytes / (n * static_cast<int64_t>(sizeof(W))) / G * G);
  // Accumulators parked between k spans: kRows a weight row of the block. (std::vector of a vector type
  // drops its alignment attribute from the template argument, which GCC warns about; the allocator
  // still aligns it, C++17's aligned new.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
  thread_local std::vector<Acc> parked;
#pragma GCC diagnostic pop
  if (parked.size() < static_cast<size_t>(block * Ops::kRows)) parked.resize(static_cast<size_t>(block * Ops::kRows));
  for (int64_t ob = o_begin; ob < o_end; ob += block) {
    const int64_t oe = std::min(o_end, ob + block);
    for (int64_t r0 = 0; r0 < n_rows; r0 += Ops::kRows) {
      const int nr = static_cast<int>(std::min<int64_t>(Ops::kRows, n_rows - r0));
      act.load(r0, nr, xs);
      float* yr = y + r0 * ldy;
      for (int64_t k0 = 0; k0 < n; k0 += kChunk) {
        const int64_t k1 = std::min(n, k0 + kChunk);
        const bool first = k0 == 0, last = k1 == n;
        int64_t o = ob;
        for (; o + G <= oe; o += G) {
          const W* ws[G];
          for (int g = 0; g < G; ++g) ws[g] = wrow(o + g);
          Acc* state = parked.data() + (o - ob) * Ops::kRows;
          // The first pass over a block brings its weights from memory.
          if (r0 == 0) {
            span_rows<Ops, G, true>(nr, ws, xs, k0, k1, n, first ? nullptr : state, last ? nullptr : state, yr + o, ldy);
          } else {
            span_rows<Ops, G, false>(nr, ws, xs, k0, k1, n, first ? nullptr : state, last ? nullptr : state, yr + o, ldy);
          }
        }
        for (; o < oe; ++o) {
          const W* ws[1] = {wrow(o)};
          Acc* state = parked.data() + (o - ob) * Ops::kRows;
          span_rows<Ops, 1, false>(nr, ws, xs, k0, k1, n, first ? nullptr : state, last ? nullptr : state, yr + o, ldy);
        }
      }
    }
  }
}

// The single-row dot and the row tile (DotTileFn: one weight row, nx <= 4 activation rows) of the same order.
template <class Ops>
float dot(const typename Ops::W* w, const typename Ops::X* x, int64_t n) {
  float out = 0.0f;
  gemm<Ops>(reinterpret_cast<const uint8_t*>(w), 0, 0, 1, n, reinterpret_cast<const uint8_t*>(x), 0, 1, &out, 1);
  return out;
}

template <class Ops>
void dot_tile(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out, int64_t out_stride) {
  ActivationTile<Ops> act(static_cast<const uint8_t*>(x), x_stride, n);
  const typename Ops::XB* xs[Ops::kRows > 4 ? Ops::kRows : 4];
  act.load(0, nx, xs);
  const typename Ops::W* ws[1] = {static_cast<const typename Ops::W*>(w)};
  switch (nx) {
    case 4: return tile<Ops, 1, 4, false>(ws, xs, n, out, out_stride);
    case 3: return tile<Ops, 1, 3, false>(ws, xs, n, out, out_stride);
    case 2: return tile<Ops, 1, 2, false>(ws, xs, n, out, out_stride);
    default: return tile<Ops, 1, 1, false>(ws, xs, n, out, out_stride);
  }
}

// The three entry points of one Ops, as a tier table lists them (f16_kernels.h).
template <class Ops>
constexpr FloatDotKernels kernels() {
  return {dot<Ops>, dot_tile<Ops>, gemm<Ops>};
}

}  // namespace glacier::kernels::x86::float_gemm
