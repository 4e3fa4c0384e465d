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

using testing::check_matmul_batch_invariance;
using testing::check_reference_against_dequantized;
using testing::check_variant_against_reference;
using testing::KQuantEntry;
using testing::random_floats;
using testing::same_bits;
std::vector<BlockQ8_K> quantized(const std::vector<float>& x) { return testing::quantized_q8_k(x); }

const KQuantEntry<BlockQ4_K> kQ4K{WeightType::Q4_K, &DotKernels::q4_k_q8_k, &DotKernels::q4_k_q8_k_tile};
const KQuantEntry<BlockQ5_K> kQ5K{WeightType::Q5_K, &DotKernels::q5_k_q8_k, &DotKernels::q5_k_q8_k_tile};
const KQuantEntry<BlockQ6_K> kQ6K{WeightType::Q6_K, &DotKernels::q6_k_q8_k, &DotKernels::q6_k_q8_k_tile};

class KQuantVariants : public ::testing::TestWithParam<Isa> {};

TEST_P(KQuantVariants, Q4KDotAndTilesEqualReferenceBitwise) { check_variant_against_reference(GetParam(), kQ4K, kLengths, 401); }
TEST_P(KQuantVariants, Q5KDotAndTilesEqualReferenceBitwise) { check_variant_against_reference(GetParam(), kQ5K, kLengths, 402); }
TEST_P(KQuantVariants, Q6KDotAndTilesEqualReferenceBitwise) { check_variant_against_reference(GetParam(), kQ6K, kLengths, 403); }

TEST_P(KQuantVariants, QuantizeRowQ8KIsBitIdenticalToReference) {
  std::mt19937 rng(404);
  std::vector<std::vector<float>> rows = testing::rows_of_every_magnitude(rng, 1024);
  // The largest magnitude twice with opposite signs (the first decides the sign of the scale), an
  // all-zero second block, and values on exact .5 boundaries once scaled (max -127 gives iscale 1).
  std::vector<float> ties(512, 0.0f);
  ties[3] = 127.0f;
  ties[200] = -127.0f;
  for (int j = 4; j < 100; ++j) ties[size_t(j)] = (j % 2 ? 1.0f : -1.0f) * (float(j % 9) + 0.5f);
  rows.push_back(ties);
  rows.push_back(std::vector<float>(256, 1e-41f));  // subnormal inputs
  testing::expect_quantized_rows_equal_reference(GetParam(), kernels_for(GetParam()).quantize_row_q8_k,
                                                 ref_kernels().quantize_row_q8_k, kQK_K, rows);
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

// The reference dot against float64 over the dequantized weight row and dequantized activations
// (tolerance: testing::kDotTolPerMagnitude).
TEST(KQuantReference, DotsAgreeWithDequantizedRows) {
  check_reference_against_dequantized(kQ4K, kLengths, 406);
  check_reference_against_dequantized(kQ5K, kLengths, 407);
  check_reference_against_dequantized(kQ6K, kLengths, 408);
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
TEST(KQuantMatmul, OutputsEqualSingleRowDots) { check_matmul_batch_invariance(kQ6K, 409); }

}  // namespace
}  // namespace glacier::kernels
