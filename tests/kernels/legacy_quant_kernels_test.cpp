// Q4_1, Q5_0, Q5_1 and IQ4_NL kernels: every variant bitwise equal to the reference twin (dots, tiles,
// Q8_1 quantization), the reference dots close to a float64 dot of the dequantized rows, the bit
// layouts checked on hand-built blocks, the weight encoders' round trip, and matmul batch invariance.
#include <gtest/gtest.h>
#include "common/isa_param_name.h"
#include "common/quant_kernel_checks.h"

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

// 1 and 3 blocks: odd counts take IQ4_NL's scalar last-block path; 4128 = 129 blocks.
const std::vector<int64_t> kLengths = {32, 96, 256, 1024, 4128};

using testing::random_floats;
using testing::same_bits;

// Blocks of random bytes (every level and fifth-bit pattern) with plausible scales and mins.
template <class Block>
std::vector<Block> random_blocks(std::mt19937& rng, int64_t n) {
  std::vector<Block> blocks(static_cast<size_t>(n / kQK8_0));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f), min(-0.2f, 0.2f);
  for (Block& b : blocks) {
    auto* raw = reinterpret_cast<unsigned char*>(&b);
    for (size_t i = 0; i < sizeof(Block); ++i) raw[i] = static_cast<unsigned char>(byte(rng));
    b.d = f32_to_fp16(scale(rng));
    if constexpr (requires { b.m; }) b.m = f32_to_fp16(min(rng));
  }
  return blocks;
}

template <class X>
std::vector<X> quantized(const std::vector<float>& x) {
  std::vector<X> q(x.size() / kQK8_0);
  if constexpr (std::is_same_v<X, BlockQ8_1>) {
    ref_kernels().quantize_row_q8_1(x.data(), q.data(), static_cast<int64_t>(x.size()));
  } else {
    ref_kernels().quantize_row_q8_0(x.data(), q.data(), static_cast<int64_t>(x.size()));
  }
  return q;
}

template <class W, class X>
using Dot = testing::DotFn<W, X>;

class LegacyQuantVariants : public ::testing::TestWithParam<Isa> {
 protected:
  const DotKernels& k() { return kernels_for(GetParam()); }
  const DotKernels& ref() { return ref_kernels(); }

  template <class W, class X>
  void expect_dot_and_tiles_match(std::mt19937& rng, Dot<W, X> dot, Dot<W, X> ref_dot, DotTileFn tile,
                                  const char* op) {
    testing::expect_dot_and_tiles_equal_reference<W, X>(
        std::string(isa_name(GetParam())) + " " + op, dot, ref_dot, tile, kLengths,
        [&](int64_t n) { return random_blocks<W>(rng, n); },
        [&](int64_t n) { return quantized<X>(random_floats(rng, n, -4.0f, 4.0f)); });
  }
};

TEST_P(LegacyQuantVariants, Q4_1DotAndTilesEqualReferenceBitwise) {
  std::mt19937 rng(501);
  expect_dot_and_tiles_match<BlockQ4_1, BlockQ8_1>(rng, k().q4_1_q8_1, ref().q4_1_q8_1, k().q4_1_q8_1_tile, "q4_1");
}

TEST_P(LegacyQuantVariants, Q5_0DotAndTilesEqualReferenceBitwise) {
  std::mt19937 rng(502);
  expect_dot_and_tiles_match<BlockQ5_0, BlockQ8_0>(rng, k().q5_0_q8_0, ref().q5_0_q8_0, k().q5_0_q8_0_tile, "q5_0");
}

TEST_P(LegacyQuantVariants, Q5_1DotAndTilesEqualReferenceBitwise) {
  std::mt19937 rng(503);
  expect_dot_and_tiles_match<BlockQ5_1, BlockQ8_1>(rng, k().q5_1_q8_1, ref().q5_1_q8_1, k().q5_1_q8_1_tile, "q5_1");
}

TEST_P(LegacyQuantVariants, IQ4_NLDotAndTilesEqualReferenceBitwise) {
  std::mt19937 rng(504);
  expect_dot_and_tiles_match<BlockIQ4_NL, BlockQ8_0>(rng, k().iq4_nl_q8_0, ref().iq4_nl_q8_0, k().iq4_nl_q8_0_tile,
                                                     "iq4_nl");
}

TEST_P(LegacyQuantVariants, QuantizeRowQ8_1IsBitIdenticalToReference) {
  std::mt19937 rng(505);
  std::vector<std::vector<float>> rows = testing::rows_of_every_magnitude(rng, 1024);
  // Exact .5 ties once scaled (amax 127 gives multiplier 1), an all-zero block and subnormal inputs.
  std::vector<float> ties(64, 0.0f);
  ties[0] = 127.0f;
  for (int j = 1; j < 32; ++j) ties[size_t(j)] = (j % 2 ? 1.0f : -1.0f) * (float(j % 9) + 0.5f);
  rows.push_back(ties);
  rows.push_back(std::vector<float>(32, 1e-41f));
  testing::expect_quantized_rows_equal_reference(GetParam(), k().quantize_row_q8_1, ref().quantize_row_q8_1, kQK8_0,
                                                 rows);
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, LegacyQuantVariants, ::testing::ValuesIn(supported_isas()),
                         glacier::testing::isa_param_name);

// Q8_1 is Q8_0 (same d, same q) plus s = fp16(d * sum(q)) with the f32 d.
TEST(LegacyQuantReference, Q8_1IsQ8_0PlusItsScaledSum) {
  std::mt19937 rng(506);
  const auto x = random_floats(rng, 256, -3.0f, 3.0f);
  const auto q1 = quantized<BlockQ8_1>(x);
  const auto q0 = quantized<BlockQ8_0>(x);
  for (size_t b = 0; b < q1.size(); ++b) {
    EXPECT_EQ(q1[b].d, q0[b].d) << b;
    EXPECT_EQ(0, std::memcmp(q1[b].qs, q0[b].qs, kQK8_0)) << b;
    float amax = 0.0f;
    int sum = 0;
    for (int j = 0; j < kQK8_0; ++j) {
      amax = std::fmax(amax, std::fabs(x[b * kQK8_0 + size_t(j)]));
      sum += q1[b].qs[j];
    }
    EXPECT_EQ(q1[b].s, f32_to_fp16(amax / 127.0f * float(sum))) << b;
  }
}

// The reference dots against float64 over the dequantized weight row and dequantized activations.
// The float path rounds each block's scale product and the accumulators (~1e-7 relative of
// sum |terms| per step); Q4_1/Q5_1 also take the activation sum from the fp16 s, up to half an fp16
// ulp (2^-11 relative) of each |m * s|. A wrong bit layout or scale is off by a sizable fraction.
constexpr double kDotTolPerMagnitude = 1e-5;
constexpr double kFp16RelativeRounding = 1.0 / 2048.0;

template <class W, class X>
void expect_ref_dot_matches_dequantized(WeightType type, Dot<W, X> dot, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int64_t n : kLengths) {
    auto w = random_blocks<W>(rng, n);
    const auto xq = quantized<X>(random_floats(rng, n, -2.0f, 2.0f));
    const Matrix m{type, w.data(), 1, n, w.size() * sizeof(W)};
    std::vector<float> wf(static_cast<size_t>(n));
    dequantize_row(m, 0, wf.data());
    double exact = 0.0, magnitude = 0.0, s_slack = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const X& xb = xq[size_t(i / kQK8_0)];
      const double xv = double(fp16_to_f32(xb.d)) * double(xb.qs[i % kQK8_0]);
      exact += double(wf[size_t(i)]) * xv;
      magnitude += std::fabs(double(wf[size_t(i)]) * xv);
    }
    if constexpr (std::is_same_v<X, BlockQ8_1>) {
      for (size_t b = 0; b < w.size(); ++b)
        s_slack += kFp16RelativeRounding * std::fabs(double(fp16_to_f32(w[b].m)) * double(fp16_to_f32(xq[b].s)));
    }
    EXPECT_NEAR(dot(w.data(), xq.data(), n), exact, kDotTolPerMagnitude * magnitude + s_slack)
        << weight_type_name(type) << " n=" << n;
  }
}

TEST(LegacyQuantReference, DotsAgreeWithDequantizedRows) {
  const DotKernels& r = ref_kernels();
  expect_ref_dot_matches_dequantized<BlockQ4_1, BlockQ8_1>(WeightType::Q4_1, r.q4_1_q8_1, 507);
  expect_ref_dot_matches_dequantized<BlockQ5_0, BlockQ8_0>(WeightType::Q5_0, r.q5_0_q8_0, 508);
  expect_ref_dot_matches_dequantized<BlockQ5_1, BlockQ8_1>(WeightType::Q5_1, r.q5_1_q8_1, 509);
  expect_ref_dot_matches_dequantized<BlockIQ4_NL, BlockQ8_0>(WeightType::IQ4_NL, r.iq4_nl_q8_0, 510);
}

template <class Block>
std::vector<float> dequantized(WeightType type, const Block& b) {
  std::vector<float> out(kQK8_0);
  const Matrix m{type, &b, 1, kQK8_0, sizeof(Block)};
  dequantize_row(m, 0, out.data());
  return out;
}

// Hand-built blocks: the format puts element j < 16 in the low nibble of qs[j], j >= 16 in the high
// nibble of qs[j - 16], and the fifth bit of element j in bit j of the little-endian qh.
TEST(LegacyQuantReference, DequantizePlacesLevelsWhereTheLayoutSays) {
  {
    BlockQ4_1 b{};
    b.d = f32_to_fp16(2.0f);
    b.m = f32_to_fp16(-1.0f);
    b.qs[3] = 0x50;  // element 19 = 5
    const auto out = dequantized(WeightType::Q4_1, b);
    for (int j = 0; j < kQK8_0; ++j) EXPECT_EQ(out[size_t(j)], j == 19 ? 9.0f : -1.0f) << j;
  }
  {
    BlockQ5_0 b{};
    b.d = f32_to_fp16(1.0f);
    for (auto& q : b.qs) q = 0x00;
    const uint32_t qh = 0xffffffffu & ~(1u << 20);  // every element at level 16 (value 0) but element 20
    std::memcpy(b.qh, &qh, 4);
    b.qs[4] = 0x30;  // element 20: level 3 without its fifth bit, value 3 - 16
    const auto out = dequantized(WeightType::Q5_0, b);
    for (int j = 0; j < kQK8_0; ++j) EXPECT_EQ(out[size_t(j)], j == 20 ? -13.0f : 0.0f) << j;
  }
  {
    BlockQ5_1 b{};
    b.d = f32_to_fp16(0.5f);
    b.m = f32_to_fp16(0.0f);
    const uint32_t qh = 1u << 7;
    std::memcpy(b.qh, &qh, 4);
    b.qs[7] = 0x01;  // element 7: level 16 + 1
    const auto out = dequantized(WeightType::Q5_1, b);
    for (int j = 0; j < kQK8_0; ++j) EXPECT_EQ(out[size_t(j)], j == 7 ? 8.5f : 0.0f) << j;
  }
  {
    BlockIQ4_NL b{};
    b.d = f32_to_fp16(1.0f);
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    const auto out = dequantized(WeightType::IQ4_NL, b);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(out[size_t(j)], float(kIQ4NLValues[j])) << j;
      EXPECT_EQ(out[size_t(j + 16)], float(kIQ4NLValues[15 - j])) << j;
    }
  }
}

// Encoders: the decoded row is within the format's rounding of the input. Q4_1/Q5_1/Q5_0 round to
// the nearest level (half a step) with d and m then rounded to fp16 (2^-11 relative each, times the
// level for d). IQ4_NL's nearest level is at most half its widest gap (-127 to -104) away.
TEST(LegacyQuantReference, EncodersRoundTripWithinHalfAStep) {
  std::mt19937 rng(511);
  const int64_t n = 4096;
  auto x = random_floats(rng, n, -1.5f, 1.0f);
  for (int j = 0; j < kQK8_0; ++j) x[size_t(j)] = 0.25f;  // a constant block: d = 0
  struct Case {
    WeightType type;
    int max_level;
    bool has_min;
  };
  for (const Case c : {Case{WeightType::Q4_1, 15, true}, Case{WeightType::Q5_1, 31, true},
                       Case{WeightType::Q5_0, 31, false}, Case{WeightType::IQ4_NL, 0, false}}) {
    const std::vector<float> back = testing::encoded_and_decoded(c.type, x);
    for (int64_t b = 0; b < n / kQK8_0; ++b) {
      float lo = x[size_t(b * kQK8_0)], hi = lo, amax = 0.0f;
      for (int j = 0; j < kQK8_0; ++j) {
        const float v = x[size_t(b * kQK8_0 + j)];
        lo = std::fmin(lo, v), hi = std::fmax(hi, v), amax = std::fmax(amax, std::fabs(v));
      }
      double bound;
      if (c.type == WeightType::IQ4_NL) {
        // The first guess d = amax / 127 puts every element within 14 d of a level (half the widest gap
        // is 11.5, the top level 113 is 14 below 127); the refit is kept only when the block's squared
        // error shrinks, so one element can take at most sqrt(32) times that.
        bound = std::sqrt(32.0) * 14.0 * amax / 127.0 + 2.0 * kFp16RelativeRounding * amax;
      } else if (c.has_min) {
        const double step = (hi - lo) / c.max_level;
        bound = 0.5 * step + kFp16RelativeRounding * (c.max_level * step + std::fabs(lo)) + 1e-7;
      } else {
        // Q5_0 maps the extreme to -16; the opposite extreme would need +16, one step above the top level 15.
        const double step = amax / 16.0;
        bound = step + kFp16RelativeRounding * 16.0 * step + 1e-7;
      }
      for (int j = 0; j < kQK8_0; ++j) {
        const size_t i = size_t(b * kQK8_0 + j);
        ASSERT_LE(std::fabs(double(back[i]) - x[i]), bound) << weight_type_name(c.type) << " block " << b << " element " << j;
      }
    }
    // The constant block decodes exactly (Q4_1/Q5_1 through the min) or to the nearest level.
    if (c.has_min) {
      EXPECT_EQ(back[0], 0.25f) << weight_type_name(c.type);
    }
  }
}

// matmul over prepared activations (Q8_1 or Q8_0): each output equals the dot of its row.
TEST(LegacyQuantMatmul, OutputsEqualSingleRowDots) {
  std::mt19937 rng(512);
  const int64_t rows = 5, cols = 96, batch = 6;
  const auto x = random_floats(rng, batch * cols, -1.0f, 1.0f);
  auto w41 = random_blocks<BlockQ4_1>(rng, rows * cols);
  auto w50 = random_blocks<BlockQ5_0>(rng, rows * cols);
  auto w51 = random_blocks<BlockQ5_1>(rng, rows * cols);
  auto wnl = random_blocks<BlockIQ4_NL>(rng, rows * cols);
  const DotKernels& k = active_kernels();
  struct Case {
    WeightType type;
    const void* w;
    size_t block_bytes;
  };
  for (const Case c : {Case{WeightType::Q4_1, w41.data(), sizeof(BlockQ4_1)},
                       Case{WeightType::Q5_0, w50.data(), sizeof(BlockQ5_0)},
                       Case{WeightType::Q5_1, w51.data(), sizeof(BlockQ5_1)},
                       Case{WeightType::IQ4_NL, wnl.data(), sizeof(BlockIQ4_NL)}}) {
    const Matrix m{c.type, c.w, rows, cols, size_t(cols / kQK8_0) * c.block_bytes};
    std::vector<unsigned char> storage(activation_bytes(m.type, batch, cols));
    const auto act = prepare_activations(m.type, x.data(), batch, cols, cols, storage.data());
    std::vector<float> y(size_t(batch * rows));
    matmul(m, act, y.data(), rows, 0, rows);
    for (int64_t r = 0; r < batch; ++r) {
      const std::vector<float> xr(x.begin() + r * cols, x.begin() + (r + 1) * cols);
      const auto q1 = quantized<BlockQ8_1>(xr);
      const auto q0 = quantized<BlockQ8_0>(xr);
      for (int64_t o = 0; o < rows; ++o) {
        const auto* wr = static_cast<const unsigned char*>(c.w) + o * m.row_bytes;
        float one = 0.0f;
        switch (c.type) {
          case WeightType::Q4_1: one = k.q4_1_q8_1(reinterpret_cast<const BlockQ4_1*>(wr), q1.data(), cols); break;
          case WeightType::Q5_0: one = k.q5_0_q8_0(reinterpret_cast<const BlockQ5_0*>(wr), q0.data(), cols); break;
          case WeightType::Q5_1: one = k.q5_1_q8_1(reinterpret_cast<const BlockQ5_1*>(wr), q1.data(), cols); break;
          default: one = k.iq4_nl_q8_0(reinterpret_cast<const BlockIQ4_NL*>(wr), q0.data(), cols); break;
        }
        EXPECT_TRUE(same_bits(y[size_t(r * rows + o)], one))
            << weight_type_name(c.type) << " row " << r << " output " << o;
      }
    }
  }
}

}  // namespace
}  // namespace glacier::kernels
