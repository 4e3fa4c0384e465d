// Packed Q8_0/Q4_0 GEMM: every variant equals the scalar twin bit for bit, the twin equals the unpacked
// dot products on the GGUF blocks (lane order, and Q4_0 block sums), results do not depend on the batch
// or the group split, and rows past the matrix are never written.
#include <gtest/gtest.h>
#include "common/isa_param_name.h"
#include "common/packed_gemm_checks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/packed_gemm.h"

namespace glacier::kernels {
namespace {

struct Shape {
  int64_t rows, cols;
};
// Rows off the 16-row grid, a single block, an odd block count, and a realistic width.
const Shape kShapes[] = {{37, 96}, {16, 32}, {100, 160}, {48, 2048}};
// Past two 8-row tiles (AVX2 Q8_0) and a remainder of 3: every remainder after a full tile.
constexpr int64_t kMaxBatch = 19;

// The four packed kernels: (type, block-sum order).
struct Kind {
  WeightType type;
  bool block_sums;
};
const Kind kKinds[] = {
    {WeightType::Q8_0, false}, {WeightType::Q8_0, true}, {WeightType::Q4_0, false}, {WeightType::Q4_0, true}};

struct Weights {
  WeightType type;
  Shape shape;
  std::vector<uint8_t> gguf;  // rows of GGUF blocks
  std::vector<uint8_t> packed;  // storage of the aligned packed copy
  Matrix matrix;
};

// bytes: the raw quant bytes 0..255 (Q8_0 stores byte - 128), uniformly random unless given.
Weights make_weights(Kind kind, Shape s, std::mt19937& rng, std::function<int()> bytes = nullptr) {
  const WeightType t = kind.type;
  Weights w{t, s, {}, {}, {}};
  const int64_t nb = s.cols / kQK8_0;
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  std::uniform_int_distribution<int> uniform_byte(0, 255);
  auto byte = [&](std::mt19937& g) { return bytes ? bytes() : uniform_byte(g); };
  if (t == WeightType::Q8_0) {
    w.gguf.resize(size_t(s.rows * nb) * sizeof(BlockQ8_0));
    auto* b = reinterpret_cast<BlockQ8_0*>(w.gguf.data());
    // The full int8 range, -128 included: a file may hold it even if quantizers never write it.
    for (int64_t i = 0; i < s.rows * nb; ++i) {
      b[i].d = f32_to_fp16(scale(rng));
      for (auto& q : b[i].qs) q = static_cast<int8_t>(byte(rng) - 128);
    }
  } else {
    w.gguf.resize(size_t(s.rows * nb) * sizeof(BlockQ4_0));
    auto* b = reinterpret_cast<BlockQ4_0*>(w.gguf.data());
    for (int64_t i = 0; i < s.rows * nb; ++i) {
      b[i].d = f32_to_fp16(scale(rng));
      for (auto& q : b[i].qs) q = static_cast<uint8_t>(byte(rng));
    }
  }
  w.matrix = Matrix{t, w.gguf.data(), s.rows, s.cols, w.gguf.size() / size_t(s.rows)};
  w.matrix.block_sum_order = kind.block_sums;
  w.matrix = testing::with_packed_copy(w.matrix, w.packed);
  return w;
}

using testing::random_activations;

// The unpacked dot of output o on its GGUF blocks: the lane-order or block-sum kernels of matmul.h.
float unpacked_dot(const Weights& w, int64_t o, const BlockQ8_0* x) {
  const int64_t nb = w.shape.cols / kQK8_0;
  const DotKernels& ref = ref_kernels();
  if (w.type == WeightType::Q8_0) {
    const auto* wb = reinterpret_cast<const BlockQ8_0*>(w.gguf.data()) + o * nb;
    return w.matrix.block_sum_order ? ref.q8_0_q8_0_block_sums(wb, x, w.shape.cols) : ref.q8_0_q8_0(wb, x, w.shape.cols);
  }
  const auto* wb = reinterpret_cast<const BlockQ4_0*>(w.gguf.data()) + o * nb;
  return w.matrix.block_sum_order ? ref.q4_0_q8_0_block_sums(wb, x, w.shape.cols) : ref.q4_0_q8_0(wb, x, w.shape.cols);
}

std::string name(const Weights& w) {
  return std::string(weight_type_name(w.type)) + (w.matrix.block_sum_order ? " block sums " : " lanes ") +
         std::to_string(w.shape.rows) + "x" + std::to_string(w.shape.cols);
}

// Every kind and shape: random weights, then kMaxBatch random activation rows, both drawn from rng.
template <class Check>
void for_each_random_case(std::mt19937& rng, Check check) {
  for (Kind kind : kKinds)
    for (Shape s : kShapes) {
      const Weights w = make_weights(kind, s, rng);
      check(w, random_activations(kMaxBatch, s.cols, rng));
    }
}

using PackedGemmVariants = testing::ActiveIsaTest;

TEST_P(PackedGemmVariants, EqualsTheReferenceTwinBitForBit) {
  std::mt19937 rng(301);
  for_each_random_case(rng, [](const Weights& w, const std::vector<float>& x) {
    for (int64_t n = 1; n <= kMaxBatch; ++n) testing::expect_equals_twin(w.matrix, x, n, kMaxBatch, name(w));
  });
}

TEST_P(PackedGemmVariants, BatchAndGroupSplitDoNotChangeAnyBit) {
  std::mt19937 rng(302);
  for_each_random_case(rng, [](const Weights& w, const std::vector<float>& x) {
    testing::expect_batch_and_group_split_bitwise(w.matrix, x, kMaxBatch, {1, 2, 3, 5}, name(w));
  });
}

// Saturation edges: weight bytes all -128, all 127 or a random mix of the two (Q8_0; Q4_0 nibbles 0 and
// 15), against activations at +-amax, which quantize to +-127 (lane-order Q8_0 quants 255 and 1). There an
// emulated dpbusd on the offset layouts would saturate its int16 pair sums (255 * -128 * 2): the tiers
// without VNNI must still equal the twin bit for bit.
TEST_P(PackedGemmVariants, ExtremeBytesEqualTheReferenceTwin) {
  std::mt19937 rng(304);
  std::bernoulli_distribution coin(0.5);
  const std::function<int()> patterns[] = {[] { return 0; }, [] { return 255; }, [&] { return coin(rng) ? 255 : 0; }};
  const Shape s{37, 256};
  for (Kind kind : kKinds)
    for (const auto& bytes : patterns) {
      const Weights w = make_weights(kind, s, rng, bytes);
      const std::vector<float> x = testing::extreme_activations(kMaxBatch, s.cols, rng);
      for (int64_t n : {int64_t{1}, int64_t{3}, kMaxBatch})
        testing::expect_equals_twin(w.matrix, x, n, kMaxBatch, name(w));
    }
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, PackedGemmVariants, ::testing::ValuesIn(supported_isas()),
                         glacier::testing::isa_param_name);

TEST(PackedGemm, ReferenceEqualsTheUnpackedDotsOnTheGgufBlocks) {
  std::mt19937 rng(303);
  constexpr int64_t kRows = 3;
  for (Kind kind : kKinds)
    for (Shape s : kShapes) {
      const Weights w = make_weights(kind, s, rng);
      testing::expect_twin_rows(w.matrix, random_activations(kRows, s.cols, rng), kRows,
                                [&](int64_t r, const float* x_row, const float* y_row) {
                                  std::vector<BlockQ8_0> xq(size_t(s.cols / kQK8_0));
                                  ref_kernels().quantize_row_q8_0(x_row, xq.data(), s.cols);
                                  for (int64_t o = 0; o < s.rows; ++o)
                                    EXPECT_EQ(y_row[o], unpacked_dot(w, o, xq.data()))
                                        << name(w) << " row " << r << " out " << o;
                                });
    }
}

TEST(PackedGemm, WritesOnlyTheMatrixRowsOfItsGroups) {
  std::mt19937 rng(304);
  const Weights w = make_weights(kKinds[0], {37, 96}, rng);
  testing::expect_writes_only_groups_1_and_2(w.matrix, random_activations(2, 96, rng), 2, name(w));
}

TEST(PackedGemm, PackedBytesMatchTheGgufBytesUpToPadding) {
  // The packing is a permutation: a group of 16 full rows holds exactly their GGUF bytes (cols 2048).
  const Matrix m{WeightType::Q8_0, nullptr, 32, 2048, 64 * sizeof(BlockQ8_0)};
  EXPECT_EQ(packed_bytes(m), size_t(32 * 64 * sizeof(BlockQ8_0)));
  const Matrix q4{WeightType::Q4_0, nullptr, 16, 2048, 64 * sizeof(BlockQ4_0)};
  EXPECT_EQ(packed_bytes(q4), size_t(16 * 64 * sizeof(BlockQ4_0)));
  EXPECT_EQ(packed_group_bytes(WeightType::Q8_0, 96) % kPackAlign, 0u);
}

}  // namespace
}  // namespace glacier::kernels
