// Q2_K and Q3_K kernels (x Q8_K activations): every variant bitwise equal to the reference twin (dot and
// tiles), the reference dot close to a float64 dot of the dequantized row, the layouts on hand-built
// super-blocks, matmul batch invariance; and the round trip of every K-quant encoder (Q2_K..Q6_K).
#include <gtest/gtest.h>
#include "common/isa_param_name.h"
#include "common/k_quant_test_data.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/dequantize.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/quantize.h"

namespace glacier::kernels {
namespace {

const std::vector<int64_t> kLengths = {256, 512, 4096};

using testing::check_matmul_batch_invariance;
using testing::check_reference_against_dequantized;
using testing::check_variant_against_reference;
using testing::KQuantEntry;

const KQuantEntry<BlockQ2_K> kQ2K{WeightType::Q2_K, &DotKernels::q2_k_q8_k, &DotKernels::q2_k_q8_k_tile};
const KQuantEntry<BlockQ3_K> kQ3K{WeightType::Q3_K, &DotKernels::q3_k_q8_k, &DotKernels::q3_k_q8_k_tile};

class LowBitKQuantVariants : public ::testing::TestWithParam<Isa> {};

TEST_P(LowBitKQuantVariants, Q2KDotAndTilesEqualReferenceBitwise) { check_variant_against_reference(GetParam(), kQ2K, kLengths, 701); }
TEST_P(LowBitKQuantVariants, Q3KDotAndTilesEqualReferenceBitwise) { check_variant_against_reference(GetParam(), kQ3K, kLengths, 702); }

INSTANTIATE_TEST_SUITE_P(SupportedIsas, LowBitKQuantVariants, ::testing::ValuesIn(supported_isas()),
                         glacier::testing::isa_param_name);

TEST(LowBitKQuantReference, Q2KDotAgreesWithDequantizedRow) { check_reference_against_dequantized(kQ2K, kLengths, 703); }
TEST(LowBitKQuantReference, Q3KDotAgreesWithDequantizedRow) { check_reference_against_dequantized(kQ3K, kLengths, 704); }

// Q2_K: sub-block 5 has scale 3 and min 2 (scales[5] = 0x23); element 128 + 32 * 2 + 7 = 199 (sub-block
// 12) takes bits 4-5 of qs[32 + 7]. Everything else: level 0, scale 1, min 0.
TEST(LowBitKQuantReference, Q2KDequantizePlacesScalesMinsAndLevelsWhereTheLayoutSays) {
  BlockQ2_K b{};
  b.d = f32_to_fp16(0.5f);
  b.dmin = f32_to_fp16(0.25f);
  for (auto& s : b.scales) s = 0x01;
  b.scales[5] = 0x23;
  b.qs[32 + 7] = 3 << 4;
  const Matrix m{WeightType::Q2_K, &b, 1, kQK_K, sizeof(b)};
  std::vector<float> out(kQK_K);
  dequantize_row(m, 0, out.data());
  for (int i = 0; i < kQK_K; ++i) {
    const float scale = i / 16 == 5 ? 3.0f : 1.0f, min = i / 16 == 5 ? 2.0f : 0.0f;
    const float level = i == 199 ? 3.0f : 0.0f;
    ASSERT_EQ(out[size_t(i)], 0.5f * scale * level - 0.25f * min) << i;
  }
}

// Q3_K: sub-block 13 has the 6-bit code 0b10'0110 = 38 (low nibble 6 in the high nibble of scales[5],
// top bits 2 at bits 6-7 of scales[9]), i.e. scale 38 - 32 = 6; every other code is 0 (scale -32).
// Element 128 + 32 * 3 + 9 = 233 (sub-block 14) has low bits 2 (bits 6-7 of qs[32 + 9]) and its high bit
// (bit 7 of hmask[9]) set: level 2 + 4 - 4 = 2; every other element has low bits 0 and no high bit: -4.
TEST(LowBitKQuantReference, Q3KDequantizePlacesScalesAndLevelsWhereTheLayoutSays) {
  BlockQ3_K b{};
  b.d = f32_to_fp16(0.5f);
  b.scales[5] = 0x60;
  b.scales[9] = 2 << 6;
  b.qs[32 + 9] = 2 << 6;
  b.hmask[9] = 1 << 7;
  const Matrix m{WeightType::Q3_K, &b, 1, kQK_K, sizeof(b)};
  std::vector<float> out(kQK_K);
  dequantize_row(m, 0, out.data());
  for (int i = 0; i < kQK_K; ++i) {
    const float scale = i / 16 == 13 ? 6.0f : -32.0f;
    const float level = i == 233 ? 2.0f : -4.0f;
    ASSERT_EQ(out[size_t(i)], 0.5f * scale * level) << i;
  }
}

TEST(LowBitKQuantMatmul, Q2KOutputsEqualSingleRowDots) { check_matmul_batch_invariance(kQ2K, 705); }
TEST(LowBitKQuantMatmul, Q3KOutputsEqualSingleRowDots) { check_matmul_batch_invariance(kQ3K, 706); }

// Encoders: the relative RMS error of a row of N(0,1) weights (with a 4x quieter 32-element stretch
// beside loud ones) stays under a bound per type: at most twice the error of a uniform quantizer with the
// type's level count over a sub-block's typical range (about 3.5 sigma for 16 elements, 4 for 32; step /
// sqrt(12)): Q2_K 0.34, Q3_K 0.14, Q4_K 0.077, Q5_K 0.037, Q6_K 0.016. Measured: 0.27, 0.14, 0.071,
// 0.036, 0.018.
struct EncoderCase {
  WeightType type;
  double max_relative_rms;
};
const EncoderCase kEncoderCases[] = {
    {WeightType::Q2_K, 0.45}, {WeightType::Q3_K, 0.25}, {WeightType::Q4_K, 0.12},
    {WeightType::Q5_K, 0.06}, {WeightType::Q6_K, 0.03},
};

TEST(KQuantEncoders, RoundTripWithinTheirLevelCounts) {
  std::mt19937 rng(707);
  const int64_t n = 8192;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  for (int j = 256; j < 288; ++j) x[size_t(j)] *= 0.25f;  // a quiet stretch beside loud ones
  for (const EncoderCase& c : kEncoderCases) {
    const std::vector<float> back = testing::encoded_and_decoded(c.type, x);
    double err2 = 0.0, sig2 = 0.0, quiet_err2 = 0.0, quiet_sig2 = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double e = double(back[size_t(i)]) - x[size_t(i)];
      ASSERT_TRUE(std::isfinite(back[size_t(i)])) << weight_type_name(c.type) << " element " << i;
      err2 += e * e, sig2 += double(x[size_t(i)]) * x[size_t(i)];
      if (i >= 256 && i < 288) quiet_err2 += e * e, quiet_sig2 += double(x[size_t(i)]) * x[size_t(i)];
    }
    const double rel = std::sqrt(err2 / sig2), quiet_rel = std::sqrt(quiet_err2 / quiet_sig2);
    std::printf("%s: relative RMS error %.4f (quiet stretch %.4f)\n", weight_type_name(c.type), rel, quiet_rel);
    EXPECT_LT(rel, c.max_relative_rms) << weight_type_name(c.type);
    // The quiet stretch has sub-block scales of its own: it must not be flattened (error ~100%).
    EXPECT_LT(quiet_rel, 2.0 * c.max_relative_rms + 0.1) << weight_type_name(c.type);
  }
}

// An all-zero row encodes to blocks that decode to exact zeros (no NaN from 0/0 scales).
TEST(KQuantEncoders, ZeroRowDecodesToZero) {
  const int64_t n = 512;
  const std::vector<float> x(static_cast<size_t>(n), 0.0f);
  for (const EncoderCase& c : kEncoderCases) {
    const std::vector<float> back = testing::encoded_and_decoded(c.type, x);
    for (float v : back) ASSERT_EQ(v, 0.0f) << weight_type_name(c.type);
  }
}

}  // namespace
}  // namespace glacier::kernels
