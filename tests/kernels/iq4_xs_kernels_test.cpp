// IQ4_XS kernels (x Q8_K activations): every variant bitwise equal to the reference twin (dot and
// tiles), the reference dot close to a float64 dot of the dequantized row, the scale and level layout
// on a hand-built super-block, the encoder's round trip, and matmul batch invariance.
#include <gtest/gtest.h>
#include "common/isa_param_name.h"

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

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// Random bytes (every level and scale code) with a plausible super-block scale.
std::vector<BlockIQ4_XS> random_blocks(std::mt19937& rng, int64_t n) {
  std::vector<BlockIQ4_XS> blocks(static_cast<size_t>(n / kQK_K));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(1e-4f, 2e-3f);
  for (BlockIQ4_XS& b : blocks) {
    auto* raw = reinterpret_cast<unsigned char*>(&b);
    for (size_t i = 0; i < sizeof(b); ++i) raw[i] = static_cast<unsigned char>(byte(rng));
    b.d = f32_to_fp16(scale(rng));
  }
  return blocks;
}

std::vector<BlockQ8_K> quantized(const std::vector<float>& x) {
  std::vector<BlockQ8_K> q(x.size() / kQK_K);
  ref_kernels().quantize_row_q8_k(x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

class IQ4XSVariants : public ::testing::TestWithParam<Isa> {};

TEST_P(IQ4XSVariants, DotAndTilesEqualReferenceBitwise) {
  std::mt19937 rng(601);
  const DotKernels& k = kernels_for(GetParam());
  const std::string isa = isa_name(GetParam());
  for (int64_t n : kLengths) {
    const auto w = random_blocks(rng, n);
    std::vector<std::vector<BlockQ8_K>> xs;
    for (int i = 0; i < kMaxTileRows; ++i) xs.push_back(quantized(random_floats(rng, n, -4.0f, 4.0f)));
    for (const auto& x : xs) {
      const float got = k.iq4_xs_q8_k(w.data(), x.data(), n), want = ref_kernels().iq4_xs_q8_k(w.data(), x.data(), n);
      EXPECT_TRUE(same_bits(got, want)) << isa << " n=" << n << ": got " << got << " ref " << want;
    }
    const size_t stride = xs[0].size() * sizeof(BlockQ8_K);
    std::vector<unsigned char> packed(stride * xs.size());
    for (size_t i = 0; i < xs.size(); ++i) std::memcpy(packed.data() + i * stride, xs[i].data(), stride);
    for (int nx = 1; nx <= kMaxTileRows; ++nx) {
      std::vector<float> out(2 * kMaxTileRows, -1.0f);
      k.iq4_xs_q8_k_tile(w.data(), packed.data(), stride, nx, n, out.data(), 2);
      for (int i = 0; i < nx; ++i)
        EXPECT_TRUE(same_bits(out[size_t(2 * i)], k.iq4_xs_q8_k(w.data(), xs[size_t(i)].data(), n)))
            << isa << " n=" << n << " tile nx=" << nx << " row " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, IQ4XSVariants, ::testing::ValuesIn(supported_isas()),
                         glacier::testing::isa_param_name);

// As in k_quant_kernels_test: only float rounding (~1e-7 relative of sum |terms| per step) separates
// the reference from float64; a wrong layout or scale would be off by a sizable fraction.
constexpr double kDotTolPerMagnitude = 1e-5;

TEST(IQ4XSReference, DotAgreesWithDequantizedRow) {
  std::mt19937 rng(602);
  for (int64_t n : kLengths) {
    auto w = random_blocks(rng, n);
    const auto xq = quantized(random_floats(rng, n, -2.0f, 2.0f));
    const Matrix m{WeightType::IQ4_XS, w.data(), 1, n, w.size() * sizeof(BlockIQ4_XS)};
    std::vector<float> wf(static_cast<size_t>(n));
    dequantize_row(m, 0, wf.data());
    double exact = 0.0, magnitude = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double xv = double(xq[size_t(i / kQK_K)].d) * double(xq[size_t(i / kQK_K)].qs[i % kQK_K]);
      exact += double(wf[size_t(i)]) * xv;
      magnitude += std::fabs(double(wf[size_t(i)]) * xv);
    }
    EXPECT_NEAR(ref_kernels().iq4_xs_q8_k(w.data(), xq.data(), n), exact, kDotTolPerMagnitude * magnitude) << n;
  }
}

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
  std::vector<uint8_t> enc(encoded_bytes(WeightType::IQ4_XS, n));
  encode_row(WeightType::IQ4_XS, x.data(), enc.data(), n);
  const Matrix m{WeightType::IQ4_XS, enc.data(), 1, n, enc.size()};
  std::vector<float> back(static_cast<size_t>(n));
  dequantize_row(m, 0, back.data());
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

TEST(IQ4XSMatmul, OutputsEqualSingleRowDots) {
  std::mt19937 rng(604);
  const int64_t rows = 5, cols = 512, batch = 6;
  auto w = random_blocks(rng, rows * cols);
  const auto x = random_floats(rng, batch * cols, -1.0f, 1.0f);
  const Matrix m{WeightType::IQ4_XS, w.data(), rows, cols, size_t(cols / kQK_K) * sizeof(BlockIQ4_XS)};
  std::vector<unsigned char> storage(activation_bytes(m.type, batch, cols));
  const auto act = prepare_activations(m.type, x.data(), batch, cols, cols, storage.data());
  std::vector<float> y(size_t(batch * rows));
  matmul(m, act, y.data(), rows, 0, rows);
  for (int64_t r = 0; r < batch; ++r) {
    const auto xq = quantized(std::vector<float>(x.begin() + r * cols, x.begin() + (r + 1) * cols));
    for (int64_t o = 0; o < rows; ++o) {
      const float one = active_kernels().iq4_xs_q8_k(w.data() + o * (cols / kQK_K), xq.data(), cols);
      EXPECT_TRUE(same_bits(y[size_t(r * rows + o)], one)) << "row " << r << " output " << o;
    }
  }
}

}  // namespace
}  // namespace glacier::kernels
