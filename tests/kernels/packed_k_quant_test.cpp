// Packed Q4_K/Q5_K/Q6_K GEMM: the scalar twin equals the row-by-row K-quant dots on the GGUF blocks bit for
// bit, every variant equals the twin and its own unpacked matmul bit for bit (so packing at load changes
// no result), whatever the batch or the group split, on random and on extreme bytes; rows past the
// matrix are never written.
#include <gtest/gtest.h>
#include "common/isa_param_name.h"
#include "common/k_quant_test_data.h"
#include "common/packed_gemm_checks.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/packed_gemm.h"
#include "kernels/packed_k_quant.h"

namespace glacier::kernels {
namespace {

struct Shape {
  int64_t rows, cols;
};
// Rows off the 16-row grid (and off the 8-row AVX2 units), one super-block, an odd count, a model width.
const Shape kShapes[] = {{37, 256}, {16, 768}, {100, 512}, {40, 2048}};
constexpr int64_t kMaxBatch = 11;  // past an 8-row tile (AVX-512 Q6_K), 4-row (AVX-512) and 3-row (AVX2) tiles, and remainders of 3, 2 and 1
const WeightType kTypes[] = {WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K};

size_t block_bytes(WeightType t) {
  return t == WeightType::Q4_K ? sizeof(BlockQ4_K) : t == WeightType::Q5_K ? sizeof(BlockQ5_K) : sizeof(BlockQ6_K);
}

struct Weights {
  std::vector<uint8_t> gguf;
  std::vector<uint8_t> packed_storage;
  Matrix plain;   // the GGUF rows, as the engine multiplied them before packing
  Matrix packed;  // the same with its packed copy
};

template <class Block>
std::vector<uint8_t> random_rows(std::mt19937& rng, Shape s) {
  const auto blocks = testing::random_k_blocks<Block>(rng, s.rows * s.cols);
  std::vector<uint8_t> bytes(blocks.size() * sizeof(Block));
  std::memcpy(bytes.data(), blocks.data(), bytes.size());
  return bytes;
}

Weights make_weights(WeightType t, Shape s, std::vector<uint8_t> gguf) {
  Weights w;
  w.gguf = std::move(gguf);
  w.plain = Matrix{t, w.gguf.data(), s.rows, s.cols, size_t(s.cols / kQK_K) * block_bytes(t)};
  w.packed = testing::with_packed_copy(w.plain, w.packed_storage);
  return w;
}

Weights random_weights(WeightType t, Shape s, std::mt19937& rng) {
  switch (t) {
    case WeightType::Q4_K: return make_weights(t, s, random_rows<BlockQ4_K>(rng, s));
    case WeightType::Q5_K: return make_weights(t, s, random_rows<BlockQ5_K>(rng, s));
    default: return make_weights(t, s, random_rows<BlockQ6_K>(rng, s));
  }
}

using testing::random_activations;

std::string name(const Matrix& m) {
  return std::string(weight_type_name(m.type)) + " " + std::to_string(m.rows) + "x" + std::to_string(m.cols);
}

class PackedKQuantVariants : public testing::ActiveIsaTest {
 protected:
  // The variant's packed results against the twin's and against its own unpacked matmul.
  void expect_equal_everywhere(const Weights& w, const std::vector<float>& x, int64_t n, int64_t max_batch = kMaxBatch) {
    testing::expect_equals_twin(w.packed, x, n, max_batch, name(w.plain));
    const std::vector<float> got = testing::all_outputs(w.packed, x, n, max_batch);
    const std::vector<float> unpacked = testing::all_outputs(w.plain, x, n, max_batch);
    EXPECT_TRUE(testing::same_bytes(got, unpacked)) << name(w.plain) << " batch " << n << " on " << isa_name(GetParam())
                                                    << ": first output " << got[0] << " vs unpacked " << unpacked[0];
  }
};

TEST_P(PackedKQuantVariants, EqualsTheTwinAndTheUnpackedMatmulBitForBit) {
  std::mt19937 rng(401);
  for (WeightType t : kTypes)
    for (Shape s : kShapes) {
      const Weights w = random_weights(t, s, rng);
      const auto x = random_activations(kMaxBatch, s.cols, rng);
      for (int64_t n = 1; n <= kMaxBatch; ++n) expect_equal_everywhere(w, x, n);
    }
}

// All-zero and all-one bytes (levels 0 and the top level, scales and mins at their extremes, Q6_K scales
// -1) and a random mix of the two, against activations at +-amax (quants +-127): the largest maddubs
// pairs and products the kernels meet.
TEST_P(PackedKQuantVariants, ExtremeBytesEqualTheTwin) {
  std::mt19937 rng(402);
  std::bernoulli_distribution coin(0.5);
  const Shape s{37, 512};
  for (WeightType t : kTypes)
    for (int pattern = 0; pattern < 3; ++pattern) {
      std::vector<uint8_t> gguf(size_t(s.rows * (s.cols / kQK_K)) * block_bytes(t));
      for (uint8_t& b : gguf) b = pattern == 0 ? 0 : pattern == 1 ? 0xff : (coin(rng) ? 0xff : 0);
      // d and dmin (or Q6_K's d) of every block: a plausible positive fp16.
      for (size_t off = 0; off < gguf.size(); off += block_bytes(t)) {
        const uint16_t d = f32_to_fp16(1e-3f);
        if (t == WeightType::Q6_K) {
          std::memcpy(&gguf[off + offsetof(BlockQ6_K, d)], &d, sizeof d);
        } else {
          std::memcpy(&gguf[off], &d, sizeof d);
          std::memcpy(&gguf[off + sizeof d], &d, sizeof d);
        }
      }
      const Weights w = make_weights(t, s, gguf);
      const std::vector<float> x = testing::extreme_activations(kMaxBatch, s.cols, rng);
      for (int64_t n : {int64_t{1}, int64_t{2}, kMaxBatch}) expect_equal_everywhere(w, x, n);
    }
}

// Batches large enough that the SIMD tiles unpack the levels once for all their row tiles, a scratch
// fill at a time: a width of one super-block and one of 66, more than one fill on every tier (64
// super-blocks a fill on AVX2, 16 or 32 on AVX-512), and batches that end on a full row tile and on each
// remainder.
TEST_P(PackedKQuantVariants, BatchesThatUnpackTheLevelsOnceEqualTheTwin) {
  std::mt19937 rng(404);
  constexpr int64_t kFrom = kPackedKQuantExpandFromRows;
  constexpr int64_t kBatch = kFrom + 8;
  for (WeightType t : kTypes)
    for (Shape s : {Shape{37, 256}, Shape{37, 66 * 256}}) {
      const Weights w = random_weights(t, s, rng);
      const auto x = random_activations(kBatch, s.cols, rng);
      for (int64_t n : {kFrom, kFrom + 1, kFrom + 2, kFrom + 3, kBatch}) expect_equal_everywhere(w, x, n, kBatch);
    }
}

TEST_P(PackedKQuantVariants, BatchAndGroupSplitDoNotChangeAnyBit) {
  std::mt19937 rng(403);
  for (WeightType t : kTypes) {
    const Weights w = random_weights(t, {100, 512}, rng);
    testing::expect_batch_and_group_split_bitwise(w.packed, random_activations(kMaxBatch, 512, rng), kMaxBatch,
                                                  {1, 2, 3}, name(w.plain));
  }
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, PackedKQuantVariants, ::testing::ValuesIn(supported_isas()),
                         glacier::testing::isa_param_name);

// The twin against the row-by-row reference dots on the GGUF blocks, output by output.
TEST(PackedKQuant, TwinEqualsTheReferenceDotsOnTheGgufBlocks) {
  std::mt19937 rng(404);
  constexpr int64_t kRows = 2;
  const DotKernels& ref = ref_kernels();
  for (WeightType t : kTypes)
    for (Shape s : kShapes) {
      const Weights w = random_weights(t, s, rng);
      testing::expect_twin_rows(
          w.packed, random_activations(kRows, s.cols, rng), kRows, [&](int64_t r, const float* x_row, const float* y_row) {
            const auto xq = testing::quantized_q8_k(std::vector<float>(x_row, x_row + s.cols));
            for (int64_t o = 0; o < s.rows; ++o) {
              const uint8_t* row = w.gguf.data() + o * w.plain.row_bytes;
              const float want =
                  t == WeightType::Q4_K   ? ref.q4_k_q8_k(reinterpret_cast<const BlockQ4_K*>(row), xq.data(), s.cols)
                  : t == WeightType::Q5_K ? ref.q5_k_q8_k(reinterpret_cast<const BlockQ5_K*>(row), xq.data(), s.cols)
                                          : ref.q6_k_q8_k(reinterpret_cast<const BlockQ6_K*>(row), xq.data(), s.cols);
              EXPECT_TRUE(testing::same_bits(y_row[o], want))
                  << name(w.plain) << " row " << r << " out " << o << ": " << y_row[o] << " vs " << want;
            }
          });
    }
}

TEST(PackedKQuant, WritesOnlyTheMatrixRowsOfItsGroups) {
  std::mt19937 rng(405);
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    const Weights w = random_weights(WeightType::Q4_K, {37, 256}, rng);
    testing::expect_writes_only_groups_1_and_2(w.packed, random_activations(3, 256, rng), 3, isa_name(isa));
  }
  set_active_isa(supported_isas().back());
}

TEST(PackedKQuant, PackedSizeIsTheGgufSizePlusTheUnpackedScales) {
  // Per super-block of 16 rows: Q4_K 2368 bytes for 16 x 144 (scales and mins a byte each instead of
  // 6 bits), Q5_K 2880 for 16 x 176, Q6_K 3392 for 16 x 210 (32 bytes of padding).
  const Matrix q4{WeightType::Q4_K, nullptr, 32, 1024, 4 * sizeof(BlockQ4_K)};
  EXPECT_EQ(packed_bytes(q4), size_t(2 * 4 * 2368));
  const Matrix q5{WeightType::Q5_K, nullptr, 17, 256, sizeof(BlockQ5_K)};
  EXPECT_EQ(packed_bytes(q5), size_t(2 * 2880));
  const Matrix q6{WeightType::Q6_K, nullptr, 16, 512, 2 * sizeof(BlockQ6_K)};
  EXPECT_EQ(packed_bytes(q6), size_t(2 * 3392));
  for (WeightType t : kTypes) EXPECT_EQ(k_quant_packed_layout(t).super_block_bytes % kPackAlign, 0u);
}

}  // namespace
}  // namespace glacier::kernels
