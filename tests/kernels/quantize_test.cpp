// Weight encoders: hand-computed Q8_0/Q4_0 blocks, byte equality with a from-the-definition reference
// on random rows and with the quantized stories260K files (made by gguf-py from the F32 file), and
// round trips within each format's step.
#include "kernels/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "kernels/dequantize.h"

namespace glacier::kernels {
namespace {

// fp16 keeps 11 significant bits: a stored scale is off from the exact one by at most 2^-11 relative.
constexpr double kFp16ScaleError = 1.0 / 2048.0;
// A Q8_0 value is off by at most half a step, plus 127 steps times the scale's fp16 error.
constexpr double kQ8ErrorInSteps = 0.5 + 127.0 * kFp16ScaleError;
// Q4_0 maps the extreme element to -8, so on the opposite side the top level is +7 and a value near
// +8 steps is off by up to one step; plus 8 steps times the scale's fp16 error.
constexpr double kQ4ErrorInSteps = 1.0 + 8.0 * kFp16ScaleError;
// f16 and bf16 round to nearest: half a unit in the last place of 11 resp. 8 significant bits.
constexpr double kF16RelativeError = 1.0 / 2048.0;
constexpr double kBf16RelativeError = 1.0 / 256.0;

std::vector<float> random_row(uint64_t seed, int64_t n, float scale) {
  std::mt19937 gen(static_cast<uint32_t>(seed));
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(gen);
  return x;
}

std::vector<float> dequantize(WeightType t, const std::vector<uint8_t>& bytes, int64_t n) {
  Matrix m;
  m.type = t;
  m.data = bytes.data();
  m.rows = 1;
  m.cols = n;
  m.row_bytes = bytes.size();
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(m, 0, out.data());
  return out;
}

std::vector<uint8_t> encode(WeightType t, const std::vector<float>& x) {
  std::vector<uint8_t> out(encoded_bytes(t, static_cast<int64_t>(x.size())));
  encode_row(t, x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

// Q8_0 straight from the format's definition, as ggml's reference quantizer states it.
BlockQ8_0 q8_0_by_definition(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < kQK8_0; ++j) amax = std::fabs(x[j]) > amax ? std::fabs(x[j]) : amax;
  const float d = amax / 127.0f;
  const float id = d == 0.0f ? 0.0f : 1.0f / d;
  BlockQ8_0 b;
  b.d = f32_to_fp16(d);
  for (int j = 0; j < kQK8_0; ++j) b.qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  return b;
}

TEST(QuantizeQ8_0, HandComputedBlockWithUnitScale) {
  // amax 127 gives d = 1 exactly (fp16 0x3C00), so every q is x rounded, halves away from zero.
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = -127.0f;
  x[2] = 0.4f;
  x[3] = 0.6f;
  x[4] = -0.5f;   // -> -1
  x[5] = 2.5f;    // -> 3 (half to even would give 2)
  x[6] = -3.49f;  // -> -3
  x[7] = 100.7f;  // -> 101
  const int8_t want[8] = {127, -127, 0, 1, -1, 3, -3, 101};
  BlockQ8_0 b;
  encode_row_q8_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3C00);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(b.qs[j], want[j]) << "element " << j;
  for (int j = 8; j < 32; ++j) EXPECT_EQ(b.qs[j], 0) << "element " << j;
}

TEST(QuantizeQ8_0, HandComputedBlockWithFractionalScale) {
  // amax 12.7: d = 0.1 (fp16 0x2E66 = 0.0999755859375), 1/d = 10 within float rounding.
  std::vector<float> x(32, 0.0f);
  x[0] = -12.7f;
  x[10] = 0.34f;   // 3.4 -> 3
  x[20] = -0.77f;  // -7.7 -> -8
  x[31] = 5.01f;   // 50.1 -> 50
  BlockQ8_0 b;
  encode_row_q8_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x2E66);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[10], 3);
  EXPECT_EQ(b.qs[20], -8);
  EXPECT_EQ(b.qs[31], 50);
  EXPECT_EQ(b.qs[1], 0);
}

TEST(QuantizeQ8_0, AllZeroBlockHasZeroScaleAndValues) {
  std::vector<float> x(64, 0.0f);
  BlockQ8_0 b[2];
  encode_row_q8_0(x.data(), b, 64);
  for (const BlockQ8_0& block : b) {
    EXPECT_EQ(block.d, 0);
    for (int8_t q : block.qs) EXPECT_EQ(q, 0);
  }
}

TEST(QuantizeQ8_0, MatchesTheDefinitionOnRandomRows) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const std::vector<float> x = random_row(seed, 256, seed % 2 ? 0.02f : 3.0f);
    std::vector<BlockQ8_0> got(8);
    encode_row_q8_0(x.data(), got.data(), 256);
    for (int b = 0; b < 8; ++b) {
      const BlockQ8_0 want = q8_0_by_definition(x.data() + b * 32);
      ASSERT_EQ(0, std::memcmp(&want, &got[b], sizeof(BlockQ8_0))) << "seed " << seed << " block " << b;
    }
  }
}

TEST(QuantizeQ4_0, HandComputedBlockWithNegativeExtreme) {
  // The extreme is -8, so d = -8 / -8 = 1 (fp16 0x3C00) and q = floor(x + 8.5) clamped to 0..15.
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;   // 0
  x[1] = 7.0f;    // 15
  x[2] = 3.2f;    // 11
  x[3] = -2.7f;   // 5
  x[4] = 0.5f;    // 9: a half rounds up
  x[16] = 7.6f;   // 16 -> clamped to 15
  x[17] = -1.0f;  // 7
  x[31] = 1.4f;   // 9
  BlockQ4_0 b;
  encode_row_q4_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0x3C00);
  // Low nibble: element j; high nibble: element j + 16. Untouched elements are 0 -> level 8.
  EXPECT_EQ(b.qs[0], 0x00 | (15 << 4));
  EXPECT_EQ(b.qs[1], 15 | (7 << 4));
  EXPECT_EQ(b.qs[2], 11 | (8 << 4));
  EXPECT_EQ(b.qs[3], 5 | (8 << 4));
  EXPECT_EQ(b.qs[4], 9 | (8 << 4));
  EXPECT_EQ(b.qs[5], 8 | (8 << 4));
  EXPECT_EQ(b.qs[15], 8 | (9 << 4));
}

TEST(QuantizeQ4_0, HandComputedBlockWithPositiveExtremeHasNegativeScale) {
  // Extreme +4: d = 4 / -8 = -0.5 (fp16 0xB800); q = floor(x / -0.5 + 8.5).
  std::vector<float> x(32, 0.0f);
  x[0] = 4.0f;    // -8 + 8.5 -> 0
  x[1] = -3.5f;   // 7 + 8.5 -> 15
  x[2] = -4.0f;   // 8 + 8.5 = 16.5 -> clamped to 15 (the extreme's first occurrence was +4)
  x[3] = 1.2f;    // -2.4 + 8.5 = 6.1 -> 6
  x[20] = -0.9f;  // 1.8 + 8.5 = 10.3 -> 10
  BlockQ4_0 b;
  encode_row_q4_0(x.data(), &b, 32);
  EXPECT_EQ(b.d, 0xB800);
  EXPECT_EQ(b.qs[0] & 0x0f, 0);
  EXPECT_EQ(b.qs[1] & 0x0f, 15);
  EXPECT_EQ(b.qs[2] & 0x0f, 15);
  EXPECT_EQ(b.qs[3] & 0x0f, 6);
  EXPECT_EQ(b.qs[4] >> 4, 10);
  EXPECT_EQ(b.qs[5] >> 4, 8);
}

TEST(QuantizeRoundTrip, Q8_0AndQ4_0WithinTheirStep) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const std::vector<float> x = random_row(seed, 512, 0.1f * static_cast<float>(seed));
    for (WeightType t : {WeightType::Q8_0, WeightType::Q4_0}) {
      const std::vector<float> y = dequantize(t, encode(t, x), 512);
      for (int b = 0; b < 512 / 32; ++b) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        const double step = t == WeightType::Q8_0 ? amax / 127.0 : amax / 8.0;
        const double allowed = step * (t == WeightType::Q8_0 ? kQ8ErrorInSteps : kQ4ErrorInSteps);
        for (int j = 0; j < 32; ++j) {
          const size_t i = static_cast<size_t>(b * 32 + j);
          ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), allowed)
              << weight_type_name(t) << " seed " << seed << " element " << i;
        }
      }
    }
  }
}

TEST(QuantizeRoundTrip, HalfTypesWithinTheirPrecision) {
  const std::vector<float> x = random_row(7, 1000, 2.0f);
  for (WeightType t : {WeightType::F16, WeightType::BF16, WeightType::F32}) {
    const std::vector<uint8_t> bytes = encode(t, x);
    ASSERT_EQ(bytes.size(), t == WeightType::F32 ? 4000u : 2000u);
    const std::vector<float> y = dequantize(t, bytes, 1000);
    const double rel = t == WeightType::F16 ? kF16RelativeError : t == WeightType::BF16 ? kBf16RelativeError : 0.0;
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), rel * std::fabs(x[i])) << weight_type_name(t) << " " << i;
  }
}

// The quantized stories260K files were written by gguf-py's quantizer from the F32 file: encoding
// the F32 tensors again must give the very same bytes.
void expect_same_as_shared_file(const std::string& f32_path, const std::string& quant_path, WeightType wt,
                                gguf::TensorType gt) {
  const auto f32 = gguf::File::open(f32_path);
  const auto quant = gguf::File::open(quant_path);
  int checked = 0;
  for (const gguf::TensorInfo& q : quant->tensors()) {
    if (q.type != gt) continue;
    const gguf::TensorInfo* src = f32->find_tensor(q.name);
    ASSERT_NE(src, nullptr) << q.name;
    ASSERT_EQ(src->type, gguf::TensorType::F32) << q.name;
    std::vector<float> x(static_cast<size_t>(src->n_elements()));
    std::memcpy(x.data(), src->data, x.size() * sizeof(float));
    const std::vector<uint8_t> got = encode(wt, x);
    ASSERT_EQ(got.size(), q.n_bytes) << q.name;
    size_t first_diff = 0;
    while (first_diff < got.size() && got[first_diff] == q.data[first_diff]) ++first_diff;
    EXPECT_EQ(first_diff, got.size()) << q.name << ": first differing byte " << first_diff;
    ++checked;
  }
  EXPECT_GT(checked, 0) << quant_path << " holds no tensor of the type";
}

TEST(QuantizeSharedFiles, Q8_0MatchesStories260K) {
  GLACIER_REQUIRE_SHARED(f32, "models/stories260K.gguf");
  GLACIER_REQUIRE_SHARED(q8, "models/stories260K-q8_0.gguf");
  expect_same_as_shared_file(f32, q8, WeightType::Q8_0, gguf::TensorType::Q8_0);
}

TEST(QuantizeSharedFiles, Q4_0MatchesStories260K) {
  GLACIER_REQUIRE_SHARED(f32, "models/stories260K.gguf");
  GLACIER_REQUIRE_SHARED(q4, "models/stories260K-q4_0.gguf");
  expect_same_as_shared_file(f32, q4, WeightType::Q4_0, gguf::TensorType::Q4_0);
}

TEST(QuantizeSharedFiles, F16MatchesStories260K) {
  GLACIER_REQUIRE_SHARED(f32, "models/stories260K.gguf");
  GLACIER_REQUIRE_SHARED(f16, "models/stories260K-f16.gguf");
  expect_same_as_shared_file(f32, f16, WeightType::F16, gguf::TensorType::F16);
}

}  // namespace
}  // namespace glacier::kernels
