// Checks shared by the quantized kernel tests: a variant's dot and multi-row tile against the
// reference twin and a tile against its own dot (bit for bit), a variant's activation quantizer
// against the twin's (byte for byte) on rows of every magnitude, and a row through an encoder and back.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/dequantize.h"
#include "kernels/dispatch.h"
#include "kernels/quantize.h"

namespace glacier::testing {

inline std::vector<float> random_floats(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// A row of n random values in +-range for each range from 1e-6 to 1e6: the magnitudes an activation
// quantizer's scale must follow.
inline std::vector<std::vector<float>> rows_of_every_magnitude(std::mt19937& rng, int64_t n) {
  std::vector<std::vector<float>> rows;
  for (float range : {1e-6f, 1.0f, 1000.0f, 1e6f}) rows.push_back(random_floats(rng, n, -range, range));
  return rows;
}

// x encoded as one row of type t and decoded back: what a weight row of x turns into. The output is preset
// to NaN, so an element the decoder does not write shows.
inline std::vector<float> encoded_and_decoded(kernels::WeightType t, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> enc(kernels::encoded_bytes(t, n));
  kernels::encode_row(t, x.data(), enc.data(), n);
  const kernels::Matrix m{t, enc.data(), 1, n, enc.size()};
  std::vector<float> back(x.size(), std::numeric_limits<float>::quiet_NaN());
  kernels::dequantize_row(m, 0, back.data());
  return back;
}

inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

template <class W, class X>
using DotFn = float (*)(const W*, const X*, int64_t);

// The tile over 1..kMaxTileRows of the activation rows xs (each n long) writes, bit for bit, what dot
// gives for each row, at an output stride of 2 (so a tile writing densely is caught).
template <class W, class X>
void expect_tile_equals_dot(kernels::DotTileFn tile, DotFn<W, X> dot, const std::vector<W>& w,
                            const std::vector<std::vector<X>>& xs, int64_t n, const std::string& what) {
  const size_t stride = xs[0].size() * sizeof(X);
  std::vector<unsigned char> packed(stride * xs.size());
  for (size_t i = 0; i < xs.size(); ++i) std::memcpy(packed.data() + i * stride, xs[i].data(), stride);
  for (int nx = 1; nx <= kernels::kMaxTileRows; ++nx) {
    std::vector<float> out(2 * kernels::kMaxTileRows, -1.0f);
    tile(w.data(), packed.data(), stride, nx, n, out.data(), 2);
    for (int i = 0; i < nx; ++i)
      EXPECT_TRUE(same_bits(out[size_t(2 * i)], dot(w.data(), xs[size_t(i)].data(), n)))
          << what << " n=" << n << " tile nx=" << nx << " row " << i;
  }
}

// For each length n: weights(n) gives one row of W blocks and activation(n) one row of X blocks (called
// kMaxTileRows times). The variant's dot equals the reference dot bit for bit on every activation row,
// and the variant's tile writes each row's variant dot (expect_tile_equals_dot). `what` names the ISA and
// weight type.
template <class W, class X, class Weights, class Activation>
void expect_dot_and_tiles_equal_reference(const std::string& what, DotFn<W, X> dot, DotFn<W, X> ref_dot,
                                          kernels::DotTileFn tile, const std::vector<int64_t>& lengths,
                                          Weights weights, Activation activation) {
  for (int64_t n : lengths) {
    const std::vector<W> w = weights(n);
    std::vector<std::vector<X>> xs;
    for (int i = 0; i < kernels::kMaxTileRows; ++i) xs.push_back(activation(n));
    for (const auto& x : xs) {
      const float got = dot(w.data(), x.data(), n), want = ref_dot(w.data(), x.data(), n);
      EXPECT_TRUE(same_bits(got, want)) << what << " n=" << n << ": got " << got << " ref " << want;
    }
    expect_tile_equals_dot(tile, dot, w, xs, n, what);
  }
}

template <class X>
using QuantizeRowFn = void (*)(const float*, X*, int64_t);

// The variant's activation quantizer writes the same bytes as the reference's for every row (each row
// a whole number of blocks of block_elems values); stops at the first block that differs.
template <class X>
void expect_quantized_rows_equal_reference(kernels::Isa isa, QuantizeRowFn<X> quantize, QuantizeRowFn<X> ref_quantize,
                                           int64_t block_elems, const std::vector<std::vector<float>>& rows) {
  for (const auto& x : rows) {
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<X> got(size_t(n / block_elems)), want(size_t(n / block_elems));
    quantize(x.data(), got.data(), n);
    ref_quantize(x.data(), want.data(), n);
    for (size_t b = 0; b < got.size(); ++b)
      ASSERT_EQ(0, std::memcmp(&got[b], &want[b], sizeof(X)))
          << kernels::isa_name(isa) << " block " << b << " of a row of " << n;
  }
}

}  // namespace glacier::testing
