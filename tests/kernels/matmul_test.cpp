// matmul: batch invariance (any batch size, any output slice, bitwise the same floats) for every
// weight type and kernel variant, agreement with a float64 dequantize-and-multiply, and the
// block-size invariant.
#include <gtest/gtest.h>
#include "common/isa_param_name.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "util/error.h"

namespace glacier::kernels {
namespace {

constexpr int64_t kRows = 37;    // not a multiple of any tile or block of rows
constexpr int64_t kCols = 96;    // three blocks: an odd count, exercising the lone-block path
constexpr int64_t kBatch = 8;

// A weight matrix in its storage type with its float64 dequantization.
struct TestWeights {
  WeightType type;
  std::vector<unsigned char> bytes;
  std::vector<double> values;  // kRows x kCols
  Matrix matrix() const {
    return Matrix{type, bytes.data(), kRows, kCols, bytes.size() / size_t(kRows)};
  }
};

TestWeights make_weights(WeightType t, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> f(size_t(kRows * kCols));
  for (float& v : f) v = dist(rng);
  TestWeights w{t, {}, std::vector<double>(f.size())};
  const size_t n = f.size();
  switch (t) {
    case WeightType::F32:
      w.bytes.resize(n * 4);
      std::memcpy(w.bytes.data(), f.data(), n * 4);
      for (size_t i = 0; i < n; ++i) w.values[i] = f[i];
      break;
    case WeightType::F16:
    case WeightType::BF16: {
      w.bytes.resize(n * 2);
      auto* h = reinterpret_cast<uint16_t*>(w.bytes.data());
      for (size_t i = 0; i < n; ++i) {
        h[i] = t == WeightType::F16 ? f32_to_fp16(f[i]) : f32_to_bf16(f[i]);
        w.values[i] = t == WeightType::F16 ? fp16_to_f32(h[i]) : bf16_to_f32(h[i]);
      }
      break;
    }
    case WeightType::Q8_0: {
      w.bytes.resize(n / kQK8_0 * sizeof(BlockQ8_0));
      auto* b = reinterpret_cast<BlockQ8_0*>(w.bytes.data());
      ref_kernels().quantize_row_q8_0(f.data(), b, int64_t(n));
      for (size_t i = 0; i < n; ++i) w.values[i] = double(fp16_to_f32(b[i / 32].d)) * b[i / 32].qs[i % 32];
      break;
    }
    case WeightType::Q4_0: {
      w.bytes.resize(n / kQK4_0 * sizeof(BlockQ4_0));
      auto* b = reinterpret_cast<BlockQ4_0*>(w.bytes.data());
      std::uniform_int_distribution<int> byte(0, 255);
      for (size_t k = 0; k < n / kQK4_0; ++k) {
        b[k].d = f32_to_fp16(std::fabs(dist(rng)) * 0.1f + 0.01f);
        for (auto& q : b[k].qs) q = static_cast<uint8_t>(byte(rng));
      }
      for (size_t i = 0; i < n; ++i) {
        const BlockQ4_0& blk = b[i / 32];
        const size_t j = i % 32;
        const int q = j < 16 ? (blk.qs[j] & 0x0f) - 8 : (blk.qs[j - 16] >> 4) - 8;
        w.values[i] = double(fp16_to_f32(blk.d)) * q;
      }
      break;
    }
    case WeightType::Q4_K:
    case WeightType::Q5_K:
    case WeightType::Q6_K:
    case WeightType::Q2_K:
    case WeightType::Q3_K:
      ADD_FAILURE() << "K-quant matrices are covered by k_quant_kernels_test and low_bit_k_quant_kernels_test";
      break;
    case WeightType::Q4_1:
    case WeightType::Q5_0:
    case WeightType::Q5_1:
    case WeightType::IQ4_NL:
    case WeightType::IQ4_XS:
      ADD_FAILURE() << "these types are covered by legacy_quant_kernels_test and iq4_xs_kernels_test";
      break;
  }
  return w;
}

std::vector<float> make_activations(std::mt19937& rng, int64_t rows) {
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> x(size_t(rows * kCols));
  for (float& v : x) v = dist(rng);
  return x;
}

// y = W x for rows [r0, r0 + n) of x, outputs [o_begin, o_end), written into y (kBatch x kRows).
void run(const TestWeights& w, const std::vector<float>& x, int64_t r0, int64_t n, int64_t o_begin,
         int64_t o_end, std::vector<float>& y) {
  std::vector<unsigned char> storage(activation_bytes(w.type, n, kCols));
  PreparedActivations p = prepare_activations(w.type, x.data() + r0 * kCols, n, kCols, kCols, storage.data());
  matmul(w.matrix(), p, y.data() + r0 * kRows, kRows, o_begin, o_end);
}

// Random weights of type t, a batch of activations and their whole product y (kBatch x kRows) on the
// active variant: where each variant test starts.
struct Product {
  TestWeights w;
  std::vector<float> x;
  std::vector<float> y;
};

Product random_product(WeightType t, std::mt19937& rng) {
  Product p{make_weights(t, rng), make_activations(rng, kBatch), std::vector<float>(size_t(kBatch * kRows))};
  run(p.w, p.x, 0, kBatch, 0, kRows, p.y);
  return p;
}

const WeightType kTypes[] = {WeightType::F32, WeightType::F16, WeightType::BF16, WeightType::Q8_0,
                             WeightType::Q4_0};

using MatmulVariants = testing::ActiveIsaTest;

TEST_P(MatmulVariants, BatchSizeAndOutputSliceDoNotChangeAnyBit) {
  std::mt19937 rng(201);
  for (WeightType t : kTypes) {
    const auto [w, x, whole] = random_product(t, rng);
    for (int64_t batch : {1, 3, 8}) {
      std::vector<float> pieces(whole.size(), NAN);
      for (int64_t r0 = 0; r0 < kBatch; r0 += batch) {
        const int64_t n = std::min(batch, kBatch - r0);
        // Three uneven output slices, as three threads would compute them.
        run(w, x, r0, n, 0, 5, pieces);
        run(w, x, r0, n, 5, 22, pieces);
        run(w, x, r0, n, 22, kRows, pieces);
      }
      EXPECT_EQ(0, std::memcmp(whole.data(), pieces.data(), whole.size() * sizeof(float)))
          << weight_type_name(t) << " on " << isa_name(GetParam()) << " in batches of " << batch;
    }
  }
}

TEST_P(MatmulVariants, MatchesFloat64DequantizeAndMultiply) {
  std::mt19937 rng(202);
  for (WeightType t : kTypes) {
    const auto [w, x, y] = random_product(t, rng);
    for (int64_t r = 0; r < kBatch; ++r) {
      const float* xr = x.data() + r * kCols;
      for (int64_t o = 0; o < kRows; ++o) {
        const double* wr = w.values.data() + o * kCols;
        double exact = 0, magnitude = 0, act_error = 0;
        for (int64_t c = 0; c < kCols; ++c) {
          exact += wr[c] * xr[c];
          magnitude += std::fabs(wr[c] * xr[c]);
        }
        // Converting the activations costs at most: fp16 / bf16 half an ulp (2^-11 / 2^-8
        // relative); Q8_0 half a step d plus the fp16 rounding of d (127 * d * 2^-11 < 0.07 d).
        if (t == WeightType::F16) act_error = magnitude * 0x1p-11;
        if (t == WeightType::BF16) act_error = magnitude * 0x1p-8;
        if (t == WeightType::Q8_0 || t == WeightType::Q4_0) {
          for (int64_t b = 0; b < kCols / 32; ++b) {
            double amax = 0, wsum = 0;
            for (int j = 0; j < 32; ++j) {
              amax = std::max(amax, std::fabs(double(xr[b * 32 + j])));
              wsum += std::fabs(wr[b * 32 + j]);
            }
            act_error += wsum * (amax / 127) * 0.57;
          }
        }
        // Float accumulation of kCols terms: well under 1e-5 of sum |w x| (kCols * eps = 6e-6).
        const double tolerance = act_error + 1e-5 * magnitude + 1e-6;
        EXPECT_NEAR(y[size_t(r * kRows + o)], exact, tolerance)
            << weight_type_name(t) << " on " << isa_name(GetParam()) << " row " << r << " out " << o;
      }
    }
  }
}

// Whatever tiling a variant uses for a product (row tiles, register tiles over weight rows), each output
// is bitwise the variant's single-row dot of that weight row and activation row.
TEST_P(MatmulVariants, EveryOutputIsTheSingleRowDot) {
  std::mt19937 rng(205);
  const DotKernels& k = kernels_for(GetParam());
  for (WeightType t : kTypes) {
    const auto [w, x, y] = random_product(t, rng);
    std::vector<unsigned char> storage(activation_bytes(w.type, kBatch, kCols));
    const PreparedActivations p = prepare_activations(w.type, x.data(), kBatch, kCols, kCols, storage.data());
    for (int64_t r = 0; r < kBatch; ++r)
      for (int64_t o = 0; o < kRows; ++o) {
        const unsigned char* wr = w.bytes.data() + o * (w.bytes.size() / size_t(kRows));
        const unsigned char* xr = static_cast<const unsigned char*>(p.data) + r * p.row_bytes;
        float want = 0;
        switch (t) {
          case WeightType::F32: want = k.f32_f32(reinterpret_cast<const float*>(wr), reinterpret_cast<const float*>(xr), kCols); break;
          case WeightType::F16: want = k.f16_f16(reinterpret_cast<const uint16_t*>(wr), reinterpret_cast<const uint16_t*>(xr), kCols); break;
          case WeightType::BF16: want = k.bf16_bf16(reinterpret_cast<const uint16_t*>(wr), reinterpret_cast<const uint16_t*>(xr), kCols); break;
          case WeightType::Q8_0: want = k.q8_0_q8_0(reinterpret_cast<const BlockQ8_0*>(wr), reinterpret_cast<const BlockQ8_0*>(xr), kCols); break;
          case WeightType::Q4_0: want = k.q4_0_q8_0(reinterpret_cast<const BlockQ4_0*>(wr), reinterpret_cast<const BlockQ8_0*>(xr), kCols); break;
          default: break;
        }
        EXPECT_EQ(y[size_t(r * kRows + o)], want) << weight_type_name(t) << " on " << isa_name(GetParam()) << " row " << r << " out " << o;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, MatmulVariants, ::testing::ValuesIn(supported_isas()),
                         glacier::testing::isa_param_name);

TEST(Matmul, SameResultsOnEveryVariantForQuantizedActivations) {
  // Quantization is bit-identical across variants, so prepared Q8_0 activations must be too.
  std::mt19937 rng(203);
  const auto x = make_activations(rng, 3);
  std::vector<std::vector<unsigned char>> prepared;
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    std::vector<unsigned char> s(activation_bytes(WeightType::Q8_0, 3, kCols));
    prepare_activations(WeightType::Q8_0, x.data(), 3, kCols, kCols, s.data());
    prepared.push_back(s);
  }
  for (const auto& p : prepared) EXPECT_EQ(p, prepared.front());
}

TEST(Matmul, BlockTypesNeedColumnsAMultipleOf32) {
  EXPECT_THROW(activation_bytes(WeightType::Q8_0, 1, 33), InternalError);
  EXPECT_THROW(activation_bytes(WeightType::Q4_0, 1, 48), InternalError);
  EXPECT_EQ(activation_bytes(WeightType::F32, 2, 33), size_t(2 * 33 * 4));
  EXPECT_EQ(activation_bytes(WeightType::Q8_0, 2, 64), size_t(2 * 2 * sizeof(BlockQ8_0)));
}

TEST(Matmul, RejectsActivationsPreparedForAnotherType) {
  std::mt19937 rng(204);
  const TestWeights w = make_weights(WeightType::Q8_0, rng);
  const auto x = make_activations(rng, 1);
  std::vector<unsigned char> s(activation_bytes(WeightType::F16, 1, kCols));
  auto p = prepare_activations(WeightType::F16, x.data(), 1, kCols, kCols, s.data());
  std::vector<float> y(kRows);
  EXPECT_THROW(matmul(w.matrix(), p, y.data(), kRows, 0, kRows), InternalError);
}

}  // namespace
}  // namespace glacier::kernels
