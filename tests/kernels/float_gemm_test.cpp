// The register-tiled F16 and BF16 GEMMs (kernels/x86/float_gemm.h) at shapes the small matmul tests miss:
// rows long enough to be split into k spans with a tail, weight rows in several L2 blocks with remainders,
// batches that leave partial activation tiles, odd output slices, and the one-row (decode) path. Every
// output must be bitwise the variant's single-row dot, and that dot near the float64 product.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/isa_param_name.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"

namespace glacier::kernels {
namespace {

constexpr int64_t kRows = 211;   // at kCols, two L2 blocks of weight rows a slice below, and groups left unfilled
constexpr int64_t kCols = 4100;  // eight full k spans of 512, then 4 elements: a partial vector step alone
// Each term is a product of values below 1 and 2 in magnitude, rounded to float on the way: the sum of
// |terms| bounds the error of a float accumulation of kCols terms by about kCols * 2^-24 of it.
constexpr double kRelativeToAbsSum = 1e-4;

struct Case {
  WeightType type;
  std::vector<uint16_t> weights;  // kRows x kCols
};

Case make_case(WeightType t, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Case c{t, std::vector<uint16_t>(size_t(kRows * kCols))};
  for (auto& h : c.weights) h = t == WeightType::F16 ? f32_to_fp16(dist(rng)) : f32_to_bf16(dist(rng));
  return c;
}

float element(WeightType t, uint16_t h) { return t == WeightType::F16 ? fp16_to_f32(h) : bf16_to_f32(h); }

using FloatGemm = testing::ActiveIsaTest;

TEST_P(FloatGemm, EveryOutputIsTheSingleRowDotAtLongRows) {
  const DotKernels& k = kernels_for(GetParam());
  std::mt19937 rng(31);
  for (WeightType t : {WeightType::F16, WeightType::BF16}) {
    const Case c = make_case(t, rng);
    const Matrix w{t, c.weights.data(), kRows, kCols, size_t(kCols) * 2};
    for (int64_t batch : {int64_t(1), int64_t(2), int64_t(9)}) {
      std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
      std::vector<float> x(size_t(batch * kCols));
      for (float& v : x) v = dist(rng);
      std::vector<unsigned char> storage(activation_bytes(t, batch, kCols));
      const PreparedActivations p = prepare_activations(t, x.data(), batch, kCols, kCols, storage.data());
      std::vector<float> y(size_t(batch * kRows), -1.0f);
      // Two slices, as two threads would take them, the first ending inside a tile group.
      matmul(w, p, y.data(), kRows, 0, 97);
      matmul(w, p, y.data(), kRows, 97, kRows);
      const auto* xs = static_cast<const uint16_t*>(p.data);
      for (int64_t r = 0; r < batch; ++r)
        for (int64_t o = 0; o < kRows; ++o) {
          const uint16_t* wr = c.weights.data() + o * kCols;
          const uint16_t* xr = xs + r * kCols;
          const float single = t == WeightType::F16 ? k.f16_f16(wr, xr, kCols) : k.bf16_bf16(wr, xr, kCols);
          ASSERT_EQ(y[size_t(r * kRows + o)], single)
              << weight_type_name(t) << " on " << isa_name(GetParam()) << ", batch " << batch << ", row " << r
              << ", output " << o;
          double exact = 0.0, abs_sum = 0.0;
          for (int64_t i = 0; i < kCols; ++i) {
            const double term = double(element(t, wr[i])) * double(element(t, xr[i]));
            exact += term;
            abs_sum += std::fabs(term);
          }
          ASSERT_NEAR(single, exact, kRelativeToAbsSum * abs_sum)
              << weight_type_name(t) << " on " << isa_name(GetParam()) << ", output " << o;
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, FloatGemm, ::testing::ValuesIn(supported_isas()),
                         glacier::testing::isa_param_name);

}  // namespace
}  // namespace glacier::kernels
