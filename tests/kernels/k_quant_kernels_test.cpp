// K-quant kernels (Q4_K, Q5_K, Q6_K weights x Q8_K activations): every variant bitwise equal to the
// reference twin (dots, tiles, Q8_K quantization), the reference dot close to a float64 dot of the
// dequantized rows, and Q8_K quantization checked against its definition.
#include <gtest/gtest.h>
#include "common/isa_param_name.h"
#include "common/k_quant_test_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dequantize.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"

namespace glacier::kernels {
namespace {

const std::vector<int64_t> kLengths = {256, 512, 1024, 4096};

using testing::random_floats;
using testing::same_bits;
template <class Block>
std::vector<Block> random_blocks(std::mt19937& rng, int64_t n) { return testing::random_k_blocks<Block>(rng, n); }
std::vector<BlockQ8_K> quantized(const std::vector<float>& x) { return testing::quantized_q8_k(x); }

template <class Block>
using KDot = float (*)(const Block*, const BlockQ8_K*, int64_t);

struct KTypeCase {
  const char* name;
  WeightType type;
};

class KQuantVariants : public ::testing::TestWithParam<Isa> {
 protected:
  const DotKernels& k() { return kernels_for(GetParam()); }
  const DotKernels& ref() { return ref_kernels(); }
  std::string label(const char* op, int64_t n) {
    return std::string(isa_name(GetParam())) + " " + op + " n=" + std::to_string(n);
  }

  template <class Block>
  void expect_dot_and_tiles_match(std::mt19937& rng, KDot<Block> dot, KDot<Block> ref_dot, DotTileFn tile,
                                  const char* op) {
    for (int64_t n : kLengths) {
      const auto w = random_blocks<Block>(rng, n);
      std::vector<std::vector<BlockQ8_K>> xs;
      for (int i = 0; i < kMaxTileRows; ++i) xs.push_back(quantized(random_floats(rng, n, -4.0f, 4.0f)));
      for (const auto& x : xs) {
        const float got = dot(w.data(), x.data(), n), want = ref_dot(w.data(), x.data(), n);
        EXPECT_TRUE(same_bits(got, want)) << label(op, n) << ": got " << got << " ref " << want;
      }
      const size_t stride = xs[0].size() * sizeof(BlockQ8_K);
      std::vector<unsigned char> packed(stride * xs.size());
      for (size_t i = 0; i < xs.size(); ++i) std::memcpy(packed.data() + i * stride, xs[i].data(), stride);
      for (int nx = 1; nx <= kMaxTileRows; ++nx) {
        std::vector<float> out(2 * kMaxTileRows, -1.0f);
        tile(w.data(), packed.data(), stride, nx, n, out.data(), 2);
        for (int i = 0; i < nx; ++i)
          EXPECT_TRUE(same_bits(out[size_t(2 * i)], dot(w.data(), xs[size_t(i)].data(), n)))
              << label(op, n) << " tile nx=" << nx << " row " << i;
      }
    }
  }
};

TEST_P(KQuantVariants, Q4KDotAndTilesEqualReferenceBitwise) {
  std::mt19937 rng(401);
  expect_dot_and_tiles_match<BlockQ4_K>(rng, k().q4_k_q8_k, ref().q4_k_q8_k, k().q4_k_q8_k_tile, "q4_k");
}

TEST_P(KQuantVariants, Q5KDotAndTilesEqualReferenceBitwise) {
  std::mt19937 rng(402);
  expect_dot_and_tiles_match<BlockQ5_K>(rng, k().q5_k_q8_k, ref().q5_k_q8_k, k().q5_k_q8_k_tile, "q5_k");
}

TEST_P(KQuantVariants, Q6KDotAndTilesEqualReferenceBitwise) {
  std::mt19937 rng(403);
  expect_dot_and_tiles_match<BlockQ6_K>(rng, k().q6_k_q8_k, ref().q6_k_q8_k, k().q6_k_q8_k_tile, "q6_k");
}

TEST_P(KQuantVariants, QuantizeRowQ8KIsBitIdenticalToReference) {
  std::mt19937 rng(404);
  std::vector<std::vector<float>> rows;
  for (float range : {1e-6f, 1.0f, 1000.0f, 1e6f}) rows.push_back(random_floats(rng, 1024, -range, range));
  // The largest magnitude twice with opposite signs (the first decides the sign of the scale), an
  // all-zero second block, and values on exact .5 boundaries once scaled (max -127 gives iscale 1).
  std::vector<float> ties(512, 0.0f);
  ties[3] = 127.0f;
  ties[200] = -127.0f;
  for (int j = 4; j < 100; ++j) ties[size_t(j)] = (j % 2 ? 1.0f : -1.0f) * (float(j % 9) + 0.5f);
  rows.push_back(ties);
  rows.push_back(std::vector<float>(256, 1e-41f));  // subnormal inputs
  for (const auto& x : rows) {
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<BlockQ8_K> got(size_t(n / kQK_K)), want(size_t(n / kQK_K));
    k().quantize_row_q8_k(x.data(), got.data(), n);
    ref().quantize_row_q8_k(x.data(), want.data(), n);
    for (size_t b = 0; b < got.size(); ++b)
      ASSERT_EQ(0, std::memcmp(&got[b], &want[b], sizeof(BlockQ8_K)))
          << isa_name(GetParam()) << " block " << b << " of a row of " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, KQuantVariants, ::testing::ValuesIn(supported_isas()),
                         glacier::testing::isa_param_name);

// ggml's nearest_int(iscale * x) as its build computes it: the multiply-add with 1.5 * 2^23 fused, so
// the exact product is rounded (ties to even) and the integer is left in the mantissa.
int nearest_int_by_magic(float iscale, float x) {
  const float shifted = std::fma(iscale, x, 12582912.0f);
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

TEST(KQuantReference, Q8KFollowsItsDefinition) {
  std::mt19937 rng(405);
  std::vector<float> x = random_floats(rng, 512, -3.0f, 3.0f);
  x[77] = -5.0f;   // block 0: negative extreme, so iscale > 0
  x[300] = 6.0f;   // block 1: positive extreme, iscale < 0
  x[301] = -6.0f;  // same magnitude later: the first one wins
  const auto q = quantized(x);
  for (int b = 0; b < 2; ++b) {
    const float max = b == 0 ? -5.0f : 6.0f;
    const float iscale = -127.0f / max;
    EXPECT_TRUE(same_bits(q[size_t(b)].d, 1.0f / iscale)) << "block " << b;
    for (int j = 0; j < kQK_K; ++j) {
      const int expect = std::min(127, nearest_int_by_magic(iscale, x[size_t(b * kQK_K + j)]));
      ASSERT_EQ(q[size_t(b)].qs[j], expect) << "block " << b << " element " << j;
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += q[size_t(b)].qs[16 * g + j];
      EXPECT_EQ(q[size_t(b)].bsums[g], sum) << "block " << b << " group " << g;
    }
  }
  EXPECT_EQ(q[0].qs[77], -127);
  EXPECT_EQ(q[1].qs[300 - kQK_K], -127);
  EXPECT_EQ(q[1].qs[301 - kQK_K], 127);
}

// The reference dot against float64 over the dequantized weight row and dequantized activations:
// the same products summed exactly, so only float rounding separates them. The float path rounds
// each super-block's scale product and accumulator (~1e-7 relative of sum |terms| per step); an
// error in a bit layout or scale would be off by a sizable fraction of sum |terms|.
constexpr double kDotTolPerMagnitude = 1e-5;

template <class Block>
void expect_ref_dot_matches_dequantized(WeightType type, KDot<Block> dot, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int64_t n : kLengths) {
    auto w = random_blocks<Block>(rng, n);
    const auto xf = random_floats(rng, n, -2.0f, 2.0f);
    const auto xq = quantized(xf);
    Matrix m;
    m.type = type;
    m.data = w.data();
    m.rows = 1;
    m.cols = n;
    m.row_bytes = w.size() * sizeof(Block);
    std::vector<float> wf(static_cast<size_t>(n));
    dequantize_row(m, 0, wf.data());
    double exact = 0.0, magnitude = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double xv = double(xq[size_t(i / kQK_K)].d) * double(xq[size_t(i / kQK_K)].qs[i % kQK_K]);
      exact += double(wf[size_t(i)]) * xv;
      magnitude += std::fabs(double(wf[size_t(i)]) * xv);
    }
    EXPECT_NEAR(dot(w.data(), xq.data(), n), exact, kDotTolPerMagnitude * magnitude)
        << weight_type_name(type) << " n=" << n;
  }
}

TEST(KQuantReference, DotsAgreeWithDequantizedRows) {
  expect_ref_dot_matches_dequantized<BlockQ4_K>(WeightType::Q4_K, ref_kernels().q4_k_q8_k, 406);
  expect_ref_dot_matches_dequantized<BlockQ5_K>(WeightType::Q5_K, ref_kernels().q5_k_q8_k, 407);
  expect_ref_dot_matches_dequantized<BlockQ6_K>(WeightType::Q6_K, ref_kernels().q6_k_q8_k, 408);
}

// Hand-built super-blocks: one level set, everything else zero, so the dequantized row has exactly
// one non-zero value (minus the min) at the element the GGUF layout assigns it to.
TEST(KQuantReference, DequantizePlacesLevelsWhereTheLayoutSays) {
  std::vector<float> out(kQK_K);
  Matrix m;
  m.rows = 1;
  m.cols = kQK_K;
  {
    BlockQ4_K b{};
    b.d = f32_to_fp16(1.0f);
    b.dmin = f32_to_fp16(0.0f);
    b.scales[1] = 2;           // sub-block 1: scale 2
    b.scales[10] = 0x05;       // sub-block 6: scale = (byte 10 & 15) | (byte 2 >> 6) << 4 = 5
    b.qs[5] = 0x70;            // high nibble 7 of qs[5]: element 32 + 5 (sub-block 1)
    b.qs[96 + 1] = 0x03;       // low nibble 3 of qs[97]: chunk 3, element 192 + 1 (sub-block 6)
    m.type = WeightType::Q4_K;
    m.data = &b;
    m.row_bytes = sizeof(b);
    dequantize_row(m, 0, out.data());
    EXPECT_EQ(out[37], 14.0f);
    EXPECT_EQ(out[193], 15.0f);
    int nonzero = 0;
    for (float v : out) nonzero += v != 0.0f;
    EXPECT_EQ(nonzero, 2);
  }
  {
    BlockQ5_K b{};
    b.d = f32_to_fp16(1.0f);
    b.dmin = f32_to_fp16(0.5f);
    for (int j = 0; j < 4; ++j) b.scales[j] = 1, b.scales[j + 4] = 0;
    for (int j = 8; j < 12; ++j) b.scales[j] = 0x01;  // sub-blocks 4-7: scale 1, min 0
    b.scales[4] = 2;            // min of sub-block 0 = 2 -> -1.0 on its elements
    b.qh[9] = 1 << 3;           // bit 3: sub-block 3 = elements 96..127, so element 96 + 9 gets +16
    m.type = WeightType::Q5_K;
    m.data = &b;
    m.row_bytes = sizeof(b);
    dequantize_row(m, 0, out.data());
    EXPECT_EQ(out[105], 16.0f);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(out[size_t(i)], -1.0f) << i;
    int nonzero = 0;
    for (float v : out) nonzero += v != 0.0f;
    EXPECT_EQ(nonzero, 33);
  }
  {
    BlockQ6_K b{};
    b.d = f32_to_fp16(1.0f);
    for (auto& s : b.scales) s = 1;
    for (auto& l : b.ql) l = 0;
    for (auto& h : b.qh) h = 0xaa;  // high bits 2 everywhere: level 32 + low - 32 = low
    b.ql[64 + 32 + 4] = 0x90;       // second half, high nibble of ql[64 + 32 + 4]: element 128 + 96 + 4
    b.scales[(128 + 96 + 4) / 16] = 3;
    m.type = WeightType::Q6_K;
    m.data = &b;
    m.row_bytes = sizeof(b);
    dequantize_row(m, 0, out.data());
    EXPECT_EQ(out[228], 27.0f);
    int nonzero = 0;
    for (float v : out) nonzero += v != 0.0f;
    EXPECT_EQ(nonzero, 1);
  }
}

// matmul over Q8_K-prepared activations: each output equals the dot of its row (batch invariance).
TEST(KQuantMatmul, OutputsEqualSingleRowDots) {
  std::mt19937 rng(409);
  const int64_t rows = 5, cols = 512, batch = 6;
  auto w = random_blocks<BlockQ6_K>(rng, rows * cols);
  const auto x = random_floats(rng, batch * cols, -1.0f, 1.0f);
  Matrix m;
  m.type = WeightType::Q6_K;
  m.data = w.data();
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = size_t(cols / kQK_K) * sizeof(BlockQ6_K);
  std::vector<unsigned char> storage(activation_bytes(m.type, batch, cols));
  const auto act = prepare_activations(m.type, x.data(), batch, cols, cols, storage.data());
  std::vector<float> y(size_t(batch * rows));
  matmul(m, act, y.data(), rows, 0, rows);
  for (int64_t r = 0; r < batch; ++r) {
    const auto xq = quantized(std::vector<float>(x.begin() + r * cols, x.begin() + (r + 1) * cols));
    for (int64_t o = 0; o < rows; ++o) {
      const float one = active_kernels().q6_k_q8_k(w.data() + o * (cols / kQK_K), xq.data(), cols);
      EXPECT_TRUE(same_bits(y[size_t(r * rows + o)], one)) << "row " << r << " output " << o;
    }
  }
}

}  // namespace
}  // namespace glacier::kernels
