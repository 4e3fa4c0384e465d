// Packed F16/BF16 GEMM: the scalar twin is the in-order fma sum of the file's rows against the rounded
// activations and stays within float accuracy of the exact dot; every variant equals the twin bit for bit
// whatever the batch, the group split or the shape (rows off the 16-row grid, widths past one span of k);
// rows past the matrix are never written; the loader packs them on the AVX2 tiers only.
#include <gtest/gtest.h>
#include "common/isa_param_name.h"
#include "common/packed_gemm_checks.h"
#include "common/quant_kernel_checks.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/packed_float.h"
#include "kernels/packed_gemm.h"
#include "kernels/quant_blocks.h"

namespace glacier::kernels {
namespace {

struct Shape {
  int64_t rows, cols;
};
// Rows off the 16-row grid, a width off the 8-lane grid, one of a model, one past a 512-wide span of k.
const Shape kShapes[] = {{37, 64}, {16, 13}, {100, 512}, {40, 2048}, {21, 1100}};
// Past two 6-row register tiles and every remainder of one.
constexpr int64_t kMaxBatch = 14;
const WeightType kTypes[] = {WeightType::F16, WeightType::BF16};

struct Weights {
  std::vector<uint16_t> values;
  std::vector<uint8_t> packed_storage;
  Matrix plain;
  Matrix packed;
};

Weights random_weights(WeightType t, Shape s, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.05f);
  Weights w;
  w.values.resize(size_t(s.rows * s.cols));
  for (uint16_t& v : w.values) v = t == WeightType::F16 ? f32_to_fp16(normal(rng)) : f32_to_bf16(normal(rng));
  w.plain = Matrix{t, w.values.data(), s.rows, s.cols, size_t(s.cols) * sizeof(uint16_t)};
  w.packed = testing::with_packed_copy(w.plain, w.packed_storage);
  return w;
}

float widen(WeightType t, uint16_t v) { return t == WeightType::F16 ? fp16_to_f32(v) : bf16_to_f32(v); }
float rounded(WeightType t, float x) { return t == WeightType::F16 ? fp16_to_f32(f32_to_fp16(x)) : bf16_to_f32(f32_to_bf16(x)); }

std::string name(const Matrix& m) {
  return std::string(weight_type_name(m.type)) + " " + std::to_string(m.rows) + "x" + std::to_string(m.cols);
}

using PackedFloatVariants = testing::ActiveIsaTest;

TEST_P(PackedFloatVariants, EqualsTheTwinBitForBit) {
  std::mt19937 rng(501);
  for (WeightType t : kTypes)
    for (Shape s : kShapes) {
      const Weights w = random_weights(t, s, rng);
      const auto x = testing::random_activations(kMaxBatch, s.cols, rng);
      for (int64_t n = 1; n <= kMaxBatch; ++n) testing::expect_equals_twin(w.packed, x, n, kMaxBatch, name(w.plain));
    }
}

// A batch past one 96-row block of packed activation tiles (the AVX2 prefill walks the rows in such blocks).
TEST_P(PackedFloatVariants, PrefillBatchesEqualTheTwin) {
  std::mt19937 rng(502);
  constexpr int64_t kBatch = 103;
  for (WeightType t : kTypes) {
    const Weights w = random_weights(t, {37, 600}, rng);
    const auto x = testing::random_activations(kBatch, 600, rng);
    for (int64_t n : {int64_t{96}, int64_t{97}, kBatch}) testing::expect_equals_twin(w.packed, x, n, kBatch, name(w.plain));
  }
}

TEST_P(PackedFloatVariants, BatchAndGroupSplitDoNotChangeAnyBit) {
  std::mt19937 rng(503);
  for (WeightType t : kTypes) {
    const Weights w = random_weights(t, {100, 520}, rng);
    testing::expect_batch_and_group_split_bitwise(w.packed, testing::random_activations(kMaxBatch, 520, rng), kMaxBatch,
                                                  {1, 2, 5, 7}, name(w.plain));
  }
}

TEST_P(PackedFloatVariants, WritesOnlyTheMatrixRowsOfItsGroups) {
  std::mt19937 rng(504);
  for (WeightType t : kTypes)
    for (int64_t n : {1, 3, 8}) {
      const Weights w = random_weights(t, {37, 40}, rng);
      testing::expect_writes_only_groups_1_and_2(w.packed, testing::random_activations(n, 40, rng), n,
                                                 name(w.plain) + " batch " + std::to_string(n));
    }
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, PackedFloatVariants, ::testing::ValuesIn(supported_isas()),
                         glacier::testing::isa_param_name);

// The twin against its definition on the file's rows: each output the fma chain over k in order of the
// weights and the activations rounded to the weight type, and within float accuracy of the exact dot.
TEST(PackedFloat, TwinIsTheInOrderSumOfTheFileRows) {
  // An fma chain of n float terms is within n roundings of the exact sum, each at most 2^-24 of the sum
  // of |w x| so far: below n * 2^-24 of the whole |w x| sum, 1.2e-4 at the widest shape (2048); twice that.
  constexpr double kRelativeToAbsSum = 2048 * 0x1p-24 * 2;
  std::mt19937 rng(505);
  constexpr int64_t kRows = 2;
  for (WeightType t : kTypes)
    for (Shape s : kShapes) {
      const Weights w = random_weights(t, s, rng);
      testing::expect_twin_rows(
          w.packed, testing::random_activations(kRows, s.cols, rng), kRows,
          [&](int64_t r, const float* x_row, const float* y_row) {
            for (int64_t o = 0; o < s.rows; ++o) {
              float chain = 0.0f;
              double exact = 0.0, abs_sum = 0.0;
              for (int64_t k = 0; k < s.cols; ++k) {
                const float wk = widen(t, w.values[size_t(o * s.cols + k)]), xk = rounded(t, x_row[k]);
                chain = std::fma(wk, xk, chain);
                exact += double(wk) * double(xk);
                abs_sum += std::fabs(double(wk) * double(xk));
              }
              EXPECT_TRUE(testing::same_bits(y_row[o], chain))
                  << name(w.plain) << " row " << r << " out " << o << ": " << y_row[o] << " vs " << chain;
              EXPECT_NEAR(y_row[o], exact, kRelativeToAbsSum * abs_sum) << name(w.plain) << " row " << r << " out " << o;
            }
          });
    }
}

TEST(PackedFloat, LoaderPacksThemOnTheAvx2TiersOnly) {
  EXPECT_TRUE(packs_float_weights(Isa::Avx2));
  EXPECT_TRUE(packs_float_weights(Isa::Avx2Vnni));
  for (Isa isa : {Isa::Ref, Isa::Avx512NoVnni, Isa::Avx512NoBf16, Isa::Avx512}) EXPECT_FALSE(packs_float_weights(isa));
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    for (WeightType t : kTypes) EXPECT_EQ(packable(t), packs_float_weights(isa)) << isa_name(isa);
    EXPECT_TRUE(packable(WeightType::Q8_0)) << isa_name(isa);
    EXPECT_FALSE(packable(WeightType::F32)) << isa_name(isa);
  }
  set_active_isa(supported_isas().back());
}

TEST(PackedFloat, PackedSizeIsSixteenColumnsOfTwoBytesAGroup) {
  const Matrix m{WeightType::F16, nullptr, 17, 100, 200};
  EXPECT_EQ(packed_bytes(m), size_t(2 * 3200));
  const Matrix odd{WeightType::BF16, nullptr, 16, 3, 6};
  EXPECT_EQ(packed_bytes(odd), size_t(2 * kPackAlign));  // 96 bytes of columns, padded to a multiple of 64
}

}  // namespace
}  // namespace glacier::kernels
