// Glue shared by the SIMD variants: turns one `rows<R>` kernel (R activation rows against one
// weight row, each row with its own accumulators) into the single-row dot and the tile entry of
// DotKernels. Because the tile and the single dot run the same per-row instruction sequence, their
// results are bitwise equal. Instantiate only with types from an anonymous namespace (one per ISA).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/dispatch.h"

namespace glacier::kernels::simd {

// K provides: using W, X; template <int R> static void rows(const W*, const X* const*, int64_t, float*).
template <class K>
float dot_single(const typename K::W* w, const typename K::X* x, int64_t n) {
  const typename K::X* xs[1] = {x};
  float out;
  K::template rows<1>(w, xs, n, &out);
  return out;
}

template <class K>
void dot_tile(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out,
              int64_t out_stride) {
  using X = typename K::X;
  const auto* wp = static_cast<const typename K::W*>(w);
  const auto* xb = static_cast<const unsigned char*>(x);
  const X* xs[kMaxTileRows] = {};
  for (int i = 0; i < nx; ++i) xs[i] = reinterpret_cast<const X*>(xb + i * x_stride);
  float results[kMaxTileRows] = {};
  switch (nx) {
    case 4: K::template rows<4>(wp, xs, n, results); break;
    case 3: K::template rows<3>(wp, xs, n, results); break;
    case 2: K::template rows<2>(wp, xs, n, results); break;
    default: K::template rows<1>(wp, xs, n, results); break;
  }
  for (int i = 0; i < nx; ++i) out[i * out_stride] = results[i];
}

}  // namespace glacier::kernels::simd
