// IQ4_XS kernels (x Q8_K activations): every variant bitwise equal to the reference twin (dot and
// tiles), the reference dot close to a float64 dot of the dequantized row, the scale and level layout
// on a hand-built super-block, the encoder's round trip, and matmul batch invariance.
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

using testing::random_floats;

const testing::KQuantEntry<BlockIQ4_XS> kIQ4XS{WeightType::IQ4_XS, &DotKernels::iq4_xs_q8_k, &DotKernels::iq4_xs_q8_k_tile};

class IQ4XSVariants : public ::testing::TestWithParam<Isa> {};

TEST_P(IQ4XSVariants, DotAndTilesEqualReferenceBitwise) {
  testing::check_variant_against_reference(GetParam(), kIQ4XS, kLengths, 601);
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, IQ4XSVariants, ::testing::ValuesIn(supported_isas()),
                         glacier::testing::isa_param_name);

TEST(IQ4XSReference, DotAgreesWithDequantizedRow) { testing::check_reference_against_dequantized(kIQ4XS, kLengths, 602); }

// Sub-block 5: scale code 0b10'0111 = 39 (low nibble 7 in the high nibble of scales_l[2], high bits 2
// at bits 10-11 of scales_h), i.e. 39 - 32 = 7; its element 16 + 3 is the high nibble of qs[16 * 5 + 3].
TEST(IQ4XSReference, DequantizePlacesScalesAndLevelsWhereTheLayoutSays) {
  BlockIQ4_XS b{};
  b.d = f32_to_fp16(0.5f);
  for (auto& q : b.qs) q = 0x88;  // level 1 everywhere
  b.scales_l[2] = 0x70;
  b.scales_h = static_cast<uint16_t>(2u << 10);
  b.qs[16 * 5 + 3] = 0xf8;  // element 5 * 32 + 19: level 113
  const Matrix m{WeightType::IQ4_XS, &b, 1, kQK_K, sizeof(b)};
  std::vector<float> out(kQK_K);
  dequantize_row(m, 0, out.data());
  for (int i = 0; i < kQK_K; ++i) {
    const float scale = i / 32 == 5 ? 7.0f : -32.0f;  // the other sub-blocks have code 0
    const float level = i == 5 * 32 + 19 ? 113.0f : 1.0f;
    ASSERT_EQ(out[size_t(i)], 0.5f * scale * level) << i;
  }
}

// Encoder: each sub-block decodes within the IQ4_NL bound of its scale (14 of its steps after the
// refit, see legacy_quant_kernels_test) plus the 6-bit rounding of that scale against d: at most half a
// code of d, i.e. 127 * |d| / 2 at the extreme level, with d = the largest sub-block scale / 32.
TEST(IQ4XSReference, EncoderRoundTripsWithinItsScaleSteps) {
  std::mt19937 rng(603);
  const int64_t n = 4096;
  auto x = random_floats(rng, n, -1.0f, 1.0f);
  for (int j = 256; j < 288; ++j) x[size_t(j)] *= 0.01f;  // a quiet sub-block beside loud ones
  const std::vector<float> back = testing::encoded_and_decoded(WeightType::IQ4_XS, x);
  double err2 = 0.0, sig2 = 0.0;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) amax = std::fmax(amax, std::fabs(x[size_t(b * kQK_K + j)]));
    const double d = amax / 127.0 / 32.0 * 1.1;  // the largest sub-block scale is near amax / 127 (refit: +-10%)
    for (int s = 0; s < 8; ++s) {
      float sub_amax = 0.0f;
      for (int j = 0; j < 32; ++j) sub_amax = std::fmax(sub_amax, std::fabs(x[size_t(b * kQK_K + 32 * s + j)]));
      const double bound = std::sqrt(32.0) * 14.0 * sub_amax / 127.0 * 1.1 + 127.0 * d / 2.0 * 2.0;
      for (int j = 0; j < 32; ++j) {
        const size_t i = size_t(b * kQK_K + 32 * s + j);
        ASSERT_LE(std::fabs(double(back[i]) - x[i]), bound) << "super-block " << b << " sub-block " << s << " element " << j;
        err2 += (double(back[i]) - x[i]) * (double(back[i]) - x[i]);
        sig2 += double(x[i]) * x[i];
      }
    }
  }
  // A 4-bit code: the whole row's relative RMS error stays well under 10% (measured ~4%).
  EXPECT_LT(std::sqrt(err2 / sig2), 0.1);
}

TEST(IQ4XSMatmul, OutputsEqualSingleRowDots) { testing::check_matmul_batch_invariance(kIQ4XS, 604); }

}  // namespace
}  // namespace glacier::kernels
