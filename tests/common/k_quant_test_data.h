// Shared by the K-quant kernel tests: super-blocks of random bytes with plausible scales, their Q8_K
// quantization by the reference twin, and the checks every K-quant weight type gets (variant vs twin
// bitwise, twin vs float64, matmul batch invariance).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "common/quant_kernel_checks.h"
#include "kernels/dequantize.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"

namespace glacier::testing {

// n / 256 super-blocks of random bytes (every bit pattern of levels, scales and mins) whose fp16 d (and
// dmin, where the type has one) are set to plausible values, so no scale is NaN.
template <class Block>
std::vector<Block> random_k_blocks(std::mt19937& rng, int64_t n) {
  std::vector<Block> blocks(static_cast<size_t>(n / kernels::kQK_K));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(1e-4f, 2e-3f);
  for (Block& b : blocks) {
    auto* raw = reinterpret_cast<unsigned char*>(&b);
    for (size_t i = 0; i < sizeof(Block); ++i) raw[i] = static_cast<unsigned char>(byte(rng));
    b.d = kernels::f32_to_fp16(scale(rng));
    if constexpr (requires { b.dmin; }) b.dmin = kernels::f32_to_fp16(scale(rng));
  }
  return blocks;
}

inline std::vector<kernels::BlockQ8_K> quantized_q8_k(const std::vector<float>& x) {
  std::vector<kernels::BlockQ8_K> q(x.size() / kernels::kQK_K);
  kernels::ref_kernels().quantize_row_q8_k(x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

// One weight type's entry points in a variant table.
template <class Block>
struct KQuantEntry {
  kernels::WeightType type;
  float (*kernels::DotKernels::*dot)(const Block*, const kernels::BlockQ8_K*, int64_t);
  kernels::DotTileFn kernels::DotKernels::*tile;
};

template <class Block>
void check_variant_against_reference(kernels::Isa isa_id, const KQuantEntry<Block>& e, const std::vector<int64_t>& lengths,
                                     unsigned seed) {
  std::mt19937 rng(seed);
  const kernels::DotKernels& k = kernels::kernels_for(isa_id);
  expect_dot_and_tiles_equal_reference<Block, kernels::BlockQ8_K>(
      std::string(kernels::isa_name(isa_id)) + " " + kernels::weight_type_name(e.type), k.*e.dot,
      kernels::ref_kernels().*e.dot, k.*e.tile, lengths, [&](int64_t n) { return random_k_blocks<Block>(rng, n); },
      [&](int64_t n) { return quantized_q8_k(random_floats(rng, n, -4.0f, 4.0f)); });
}

// Only float rounding (~1e-7 relative of sum |terms| per step) separates
// the reference from float64; a wrong layout or scale would be off by a sizable fraction.
inline constexpr double kDotTolPerMagnitude = 1e-5;

template <class Block>
void check_reference_against_dequantized(const KQuantEntry<Block>& e, const std::vector<int64_t>& lengths, unsigned seed) {
  std::mt19937 rng(seed);
  for (int64_t n : lengths) {
    auto w = random_k_blocks<Block>(rng, n);
    const auto xq = quantized_q8_k(random_floats(rng, n, -2.0f, 2.0f));
    const kernels::Matrix m{e.type, w.data(), 1, n, w.size() * sizeof(Block)};
    std::vector<float> wf(static_cast<size_t>(n));
    kernels::dequantize_row(m, 0, wf.data());
    double exact = 0.0, magnitude = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double xv = double(xq[size_t(i / kernels::kQK_K)].d) * double(xq[size_t(i / kernels::kQK_K)].qs[i % kernels::kQK_K]);
      exact += double(wf[size_t(i)]) * xv;
      magnitude += std::fabs(double(wf[size_t(i)]) * xv);
    }
    EXPECT_NEAR((kernels::ref_kernels().*e.dot)(w.data(), xq.data(), n), exact, kDotTolPerMagnitude * magnitude)
        << kernels::weight_type_name(e.type) << " n=" << n;
  }
}

template <class Block>
void check_matmul_batch_invariance(const KQuantEntry<Block>& e, unsigned seed) {
  std::mt19937 rng(seed);
  const int64_t rows = 5, cols = 512, batch = 6;
  auto w = random_k_blocks<Block>(rng, rows * cols);
  const auto x = random_floats(rng, batch * cols, -1.0f, 1.0f);
  const kernels::Matrix m{e.type, w.data(), rows, cols, size_t(cols / kernels::kQK_K) * sizeof(Block)};
  std::vector<unsigned char> storage(kernels::activation_bytes(m.type, batch, cols));
  const auto act = kernels::prepare_activations(m.type, x.data(), batch, cols, cols, storage.data());
  std::vector<float> y(size_t(batch * rows));
  kernels::matmul(m, act, y.data(), rows, 0, rows);
  for (int64_t r = 0; r < batch; ++r) {
    const auto xq = quantized_q8_k(std::vector<float>(x.begin() + r * cols, x.begin() + (r + 1) * cols));
    for (int64_t o = 0; o < rows; ++o) {
      const float one = (kernels::active_kernels().*e.dot)(w.data() + o * (cols / kernels::kQK_K), xq.data(), cols);
      EXPECT_TRUE(same_bits(y[size_t(r * rows + o)], one)) << kernels::weight_type_name(e.type) << " row " << r << " output " << o;
    }
  }
}

}  // namespace glacier::testing
