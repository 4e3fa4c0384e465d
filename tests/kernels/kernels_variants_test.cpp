// Every SIMD kernel variant the CPU supports against the scalar reference twins: dots within a
// named tolerance on seeded random inputs, Q8_0 quantization bit-identical, tiles bitwise equal to
// single-row dots.
#include <gtest/gtest.h>
#include "common/isa_param_name.h"
#include "common/quant_kernel_checks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dispatch.h"

namespace glacier::kernels {
namespace {

// Both sides are float sums of up to 4096 terms in different orders; each is within n*eps*sum|t|
// (2.4e-4 sum|t| at n = 4096) of the exact sum in the worst case, and random signs keep real
// errors near sqrt(n)*eps*sum|t|. An indexing or scaling bug is off by a few percent of sum|t|.
constexpr double kAbsPerMagnitude = 1e-4;
// Relative slack for results far from zero (one float rounding of the final value, with margin).
constexpr double kRel = 1e-6;

const std::vector<int64_t> kFloatLengths = {1, 7, 16, 31, 32, 33, 100, 256, 1000, 4096};
const std::vector<int64_t> kBlockLengths = {32, 64, 96, 256, 1024, 4096};

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

std::vector<uint16_t> to_halves(const std::vector<float>& v, uint16_t (*conv)(float)) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = conv(v[i]);
  return h;
}

// Weights from random bytes (the full int8 range, -128 included) and small random scales.
std::vector<BlockQ8_0> random_q8_weights(std::mt19937& rng, int64_t n) {
  std::vector<BlockQ8_0> b(static_cast<size_t>(n / kQK8_0));
  std::uniform_int_distribution<int> byte(-128, 127);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  for (auto& blk : b) {
    blk.d = f32_to_fp16(scale(rng));
    for (auto& q : blk.qs) q = static_cast<int8_t>(byte(rng));
  }
  return b;
}

std::vector<BlockQ4_0> random_q4_weights(std::mt19937& rng, int64_t n) {
  std::vector<BlockQ4_0> b(static_cast<size_t>(n / kQK4_0));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  for (auto& blk : b) {
    blk.d = f32_to_fp16(scale(rng));
    for (auto& q : blk.qs) q = static_cast<uint8_t>(byte(rng));
  }
  return b;
}

std::vector<BlockQ8_0> quantized(const std::vector<float>& x) {
  std::vector<BlockQ8_0> b(x.size() / kQK8_0);
  ref_kernels().quantize_row_q8_0(x.data(), b.data(), static_cast<int64_t>(x.size()));
  return b;
}

// sum |w_i x_i| for element types.
template <typename T>
double magnitude(const T* w, const T* x, int64_t n, float (*to_f)(T)) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m += std::fabs(double(to_f(w[i])) * double(to_f(x[i])));
  return m;
}
float identity(float f) { return f; }

int q4_value(const BlockQ4_0& b, int j) {
  return j < 16 ? (b.qs[j] & 0x0f) - 8 : (b.qs[j - 16] >> 4) - 8;
}
template <typename WBlock>
double block_magnitude(const WBlock* w, const BlockQ8_0* x, int64_t n) {
  double m = 0;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    double s = 0;
    for (int j = 0; j < kQK8_0; ++j) {
      int wq;
      if constexpr (std::is_same_v<WBlock, BlockQ4_0>) wq = q4_value(w[b], j);
      else wq = w[b].qs[j];
      s += std::fabs(double(wq) * x[b].qs[j]);
    }
    m += s * std::fabs(double(fp16_to_f32(w[b].d)) * fp16_to_f32(x[b].d));
  }
  return m;
}

void expect_close(float got, float ref, double magnitude, const std::string& what) {
  const double tol = kAbsPerMagnitude * magnitude + kRel * std::fabs(ref);
  EXPECT_LE(std::fabs(double(got) - double(ref)), tol) << what << ": got " << got << " ref " << ref;
}

class Variants : public ::testing::TestWithParam<Isa> {
 protected:
  const DotKernels& k() { return kernels_for(GetParam()); }
  const DotKernels& ref() { return ref_kernels(); }
  std::string label(const char* op, int64_t n) {
    return std::string(isa_name(GetParam())) + " " + op + " n=" + std::to_string(n);
  }

  using HalfDot = float (*)(const uint16_t*, const uint16_t*, int64_t);
  // A 16-bit float format's dot (to_half / from_half its conversions) against the twin on random rows.
  void expect_half_dots_close(std::mt19937& rng, uint16_t (*to_half)(float), float (*from_half)(uint16_t),
                              HalfDot dot, HalfDot ref_dot, const char* op) {
    for (int64_t n : kFloatLengths) {
      auto w = to_halves(random_floats(rng, n), to_half), x = to_halves(random_floats(rng, n), to_half);
      expect_close(dot(w.data(), x.data(), n), ref_dot(w.data(), x.data(), n),
                   magnitude<uint16_t>(w.data(), x.data(), n, from_half), label(op, n));
    }
  }

  template <typename WBlock>
  using BlockDot = float (*)(const WBlock*, const BlockQ8_0*, int64_t);
  // A block type's lane-order dot against the twin on random weights and Q8_0 activations.
  template <typename WBlock>
  void expect_block_dots_close(std::mt19937& rng, std::vector<WBlock> (*random_weights)(std::mt19937&, int64_t),
                               BlockDot<WBlock> dot, BlockDot<WBlock> ref_dot, const char* op) {
    for (int64_t n : kBlockLengths) {
      auto w = random_weights(rng, n);
      auto x = quantized(random_floats(rng, n, -3.0f, 3.0f));
      expect_close(dot(w.data(), x.data(), n), ref_dot(w.data(), x.data(), n), block_magnitude(w.data(), x.data(), n),
                   label(op, n));
    }
  }
};

TEST_P(Variants, F32DotMatchesReference) {
  std::mt19937 rng(101);
  for (int64_t n : kFloatLengths) {
    auto w = random_floats(rng, n), x = random_floats(rng, n);
    expect_close(k().f32_f32(w.data(), x.data(), n), ref().f32_f32(w.data(), x.data(), n),
                 magnitude<float>(w.data(), x.data(), n, identity), label("f32", n));
  }
}

TEST_P(Variants, F16DotMatchesReference) {
  std::mt19937 rng(102);
  expect_half_dots_close(rng, f32_to_fp16, fp16_to_f32, k().f16_f16, ref().f16_f16, "f16");
}

TEST_P(Variants, Bf16DotMatchesReference) {
  std::mt19937 rng(103);
  expect_half_dots_close(rng, f32_to_bf16, bf16_to_f32, k().bf16_bf16, ref().bf16_bf16, "bf16");
}

TEST_P(Variants, Q8DotMatchesReference) {
  std::mt19937 rng(104);
  expect_block_dots_close<BlockQ8_0>(rng, random_q8_weights, k().q8_0_q8_0, ref().q8_0_q8_0, "q8_0");
}

TEST_P(Variants, Q4DotMatchesReference) {
  std::mt19937 rng(105);
  expect_block_dots_close<BlockQ4_0>(rng, random_q4_weights, k().q4_0_q8_0, ref().q4_0_q8_0, "q4_0");
}

// Block-sum order: exact integer block sums and one float chain, so every variant equals the twin bitwise.
TEST_P(Variants, BlockSumDotsAreBitIdenticalToReference) {
  std::mt19937 rng(108);
  for (int64_t n : kBlockLengths) {
    auto x = quantized(random_floats(rng, n, -3.0f, 3.0f));
    auto w8 = random_q8_weights(rng, n);
    auto w4 = random_q4_weights(rng, n);
    const float got8 = k().q8_0_q8_0_block_sums(w8.data(), x.data(), n), want8 = ref().q8_0_q8_0_block_sums(w8.data(), x.data(), n);
    const float got4 = k().q4_0_q8_0_block_sums(w4.data(), x.data(), n), want4 = ref().q4_0_q8_0_block_sums(w4.data(), x.data(), n);
    EXPECT_EQ(0, std::memcmp(&got8, &want8, sizeof got8)) << label("q8_0 block sums", n) << ": " << got8 << " vs " << want8;
    EXPECT_EQ(0, std::memcmp(&got4, &want4, sizeof got4)) << label("q4_0 block sums", n) << ": " << got4 << " vs " << want4;
  }
}

// Saturation edges of the int8 products: weights all -128, all 127 or a random mix (Q4_0 nibbles 0 and
// 15) against activations quantized to +-127. An emulated dpbusd whose int16 pair sums overflowed would be
// off by half the result, far outside the tolerance; block sums must stay bitwise.
TEST_P(Variants, ExtremeInt8InputsMatchReference) {
  std::mt19937 rng(109);
  std::bernoulli_distribution coin(0.5);
  constexpr int64_t n = 256;
  std::vector<float> xf(n);
  for (float& v : xf) v = coin(rng) ? 2.0f : -2.0f;
  for (auto xs : {std::vector<float>(n, 2.0f), std::vector<float>(n, -2.0f), xf}) {
    const auto x = quantized(xs);
    for (int pattern = 0; pattern < 3; ++pattern) {
      auto byte = [&] { return pattern == 0 ? 0 : pattern == 1 ? 255 : (coin(rng) ? 255 : 0); };
      std::vector<BlockQ8_0> w8(n / kQK8_0);
      std::vector<BlockQ4_0> w4(n / kQK4_0);
      for (auto& b : w8) {
        b.d = f32_to_fp16(0.01f);
        for (auto& q : b.qs) q = static_cast<int8_t>(byte() - 128);
      }
      for (auto& b : w4) {
        b.d = f32_to_fp16(0.01f);
        for (auto& q : b.qs) q = static_cast<uint8_t>(byte());
      }
      const std::string what = label("extreme bytes", n) + " pattern " + std::to_string(pattern);
      expect_close(k().q8_0_q8_0(w8.data(), x.data(), n), ref().q8_0_q8_0(w8.data(), x.data(), n),
                   block_magnitude(w8.data(), x.data(), n), what + " q8_0");
      expect_close(k().q4_0_q8_0(w4.data(), x.data(), n), ref().q4_0_q8_0(w4.data(), x.data(), n),
                   block_magnitude(w4.data(), x.data(), n), what + " q4_0");
      const float got8 = k().q8_0_q8_0_block_sums(w8.data(), x.data(), n), want8 = ref().q8_0_q8_0_block_sums(w8.data(), x.data(), n);
      const float got4 = k().q4_0_q8_0_block_sums(w4.data(), x.data(), n), want4 = ref().q4_0_q8_0_block_sums(w4.data(), x.data(), n);
      EXPECT_EQ(0, std::memcmp(&got8, &want8, sizeof got8)) << what << " q8_0 block sums: " << got8 << " vs " << want8;
      EXPECT_EQ(0, std::memcmp(&got4, &want4, sizeof got4)) << what << " q4_0 block sums: " << got4 << " vs " << want4;
    }
  }
}

TEST_P(Variants, QuantizeRowIsBitIdenticalToReference) {
  std::mt19937 rng(106);
  std::vector<std::vector<float>> rows = testing::rows_of_every_magnitude(rng, 4096);
  // Exact ties: with amax 127 the scale is 1, so k + 0.5 must round away from zero.
  std::vector<float> ties(64, 0.0f);
  ties[0] = 127.0f;
  for (int j = 1; j < 32; ++j) ties[j] = (j % 2 ? 1.0f : -1.0f) * (float(j % 8) + 0.5f);
  rows.push_back(ties);                            // second block stays all zero: d = 0
  rows.push_back(std::vector<float>(32, 1e-41f));  // subnormal inputs
  rows.push_back(random_floats(rng, 96, -1e-3f, 5.0f));
  testing::expect_quantized_rows_equal_reference(GetParam(), k().quantize_row_q8_0, ref().quantize_row_q8_0, kQK8_0,
                                                 rows);
}

TEST_P(Variants, TilesEqualSingleRowDotsBitwise) {
  using testing::expect_tile_equals_dot;
  std::mt19937 rng(107);
  for (int64_t n : {int64_t{7}, int64_t{33}, int64_t{96}, int64_t{1000}}) {
    std::vector<std::vector<float>> xf;
    for (int i = 0; i < kMaxTileRows; ++i) xf.push_back(random_floats(rng, n));
    auto wf = random_floats(rng, n);
    expect_tile_equals_dot<float, float>(k().f32_f32_tile, k().f32_f32, wf, xf, n, label("f32", n));
    std::vector<std::vector<uint16_t>> xh, xb;
    for (auto& v : xf) xh.push_back(to_halves(v, f32_to_fp16)), xb.push_back(to_halves(v, f32_to_bf16));
    expect_tile_equals_dot<uint16_t, uint16_t>(k().f16_f16_tile, k().f16_f16, to_halves(wf, f32_to_fp16), xh, n,
                                               label("f16", n));
    expect_tile_equals_dot<uint16_t, uint16_t>(k().bf16_bf16_tile, k().bf16_bf16, to_halves(wf, f32_to_bf16), xb, n,
                                               label("bf16", n));
    if (n % kQK8_0 != 0) continue;
    std::vector<std::vector<BlockQ8_0>> xq;
    for (auto& v : xf) xq.push_back(quantized(v));
    expect_tile_equals_dot<BlockQ8_0, BlockQ8_0>(k().q8_0_q8_0_tile, k().q8_0_q8_0, random_q8_weights(rng, n), xq, n,
                                                 label("q8_0", n));
    expect_tile_equals_dot<BlockQ4_0, BlockQ8_0>(k().q4_0_q8_0_tile, k().q4_0_q8_0, random_q4_weights(rng, n), xq, n,
                                                 label("q4_0", n));
    expect_tile_equals_dot<BlockQ8_0, BlockQ8_0>(k().q8_0_q8_0_block_sums_tile, k().q8_0_q8_0_block_sums,
                                                 random_q8_weights(rng, n), xq, n, label("q8_0 block sums", n));
    expect_tile_equals_dot<BlockQ4_0, BlockQ8_0>(k().q4_0_q8_0_block_sums_tile, k().q4_0_q8_0_block_sums,
                                                 random_q4_weights(rng, n), xq, n, label("q4_0 block sums", n));
  }
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, Variants, ::testing::ValuesIn(supported_isas()),
                         glacier::testing::isa_param_name);

TEST(Variants, ReportsWhichVariantsRan) {
  std::string tested, untested;
  for (Isa isa : {Isa::Ref, Isa::Avx2, Isa::Avx2Vnni, Isa::Avx512NoVnni, Isa::Avx512NoBf16, Isa::Avx512})
    (cpu_supports(isa) ? tested : untested) += std::string(" ") + isa_name(isa);
  // Unsupported variants cannot be exercised on this CPU: say so rather than pass silently.
  if (!untested.empty()) GTEST_SKIP() << "not supported here, so not tested:" << untested << "; tested:" << tested;
  EXPECT_EQ(supported_isas().size(), 6u) << tested;
}

}  // namespace
}  // namespace glacier::kernels
