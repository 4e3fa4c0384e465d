// Each kernel variant's f32 -> f16 activation row conversions (DotKernels::f32_to_f16_row, and
// round_to_f16_row, which widens back) against the portable f32_to_fp16 that fp16_test.cpp checks
// against IEEE: bitwise, over every exponent and sign, the rounding ties, the subnormal and overflow
// boundaries, NaN and every tail length.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/isa_param_name.h"
#include "kernels/dispatch.h"
#include "kernels/quant_blocks.h"

namespace glacier::kernels {
namespace {

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// Floats that exercise every branch of the conversion: for each sign and each of the 256 exponents, the
// mantissas at and around the f16 rounding point (13 dropped bits: ties at 0x1000) plus random ones.
std::vector<float> conversion_inputs() {
  std::mt19937 rng(20250);
  std::vector<float> v;
  const uint32_t mantissas[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x2000, 0x3000, 0x7fffff, 0x7ff000, 0x400000};
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (uint32_t e = 0; e < 256; ++e) {
      for (uint32_t m : mantissas) v.push_back(from_bits(sign << 31 | e << 23 | m));
      for (int i = 0; i < 64; ++i) v.push_back(from_bits(sign << 31 | e << 23 | (rng() & 0x7fffff)));
    }
  for (float f : {65504.0f, 65520.0f, std::nextafter(65520.0f, 0.0f), std::ldexp(1.0f, -25), std::ldexp(1.0f, -24),
                  std::ldexp(1.0f, -14), INFINITY, -INFINITY, NAN})
    v.push_back(f);
  return v;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
uint16_t bits(uint16_t h) { return h; }

// conv(x, y, n) writes y[i] = want(x[i]) bit for bit (NaN included) over every input of
// conversion_inputs(), and, for every tail length up to 40, nothing past its n elements.
template <class Out, class Want>
void expect_bitwise_row_conversion(void (*conv)(const float*, Out*, int64_t), Want want) {
  ASSERT_NE(conv, nullptr);
  const std::vector<float> in = conversion_inputs();
  std::vector<Out> out(in.size());
  conv(in.data(), out.data(), static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(bits(out[i]), bits(want(in[i]))) << "float bits 0x" << std::hex << bits(in[i]);
  const Out guard = want(-1234.5f);
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<Out> row(static_cast<size_t>(n) + 8, guard);
    conv(in.data() + 1000, row.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bits(row[size_t(i)]), bits(want(in[size_t(1000 + i)]))) << "n " << n;
    for (size_t i = size_t(n); i < row.size(); ++i) ASSERT_EQ(bits(row[i]), bits(guard)) << "written past n = " << n;
  }
}

class F16RowConversion : public ::testing::TestWithParam<Isa> {};

TEST_P(F16RowConversion, F16RowsAreBitwiseThePortableConversion) {
  expect_bitwise_row_conversion(kernels_for(GetParam()).f32_to_f16_row, [](float x) { return f32_to_fp16(x); });
}

// The packed F16 GEMM's activations: each element rounded to f16 and widened back.
TEST_P(F16RowConversion, RoundingThroughF16IsBitwiseThePortablePair) {
  expect_bitwise_row_conversion(kernels_for(GetParam()).round_to_f16_row,
                                [](float x) { return fp16_to_f32(f32_to_fp16(x)); });
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, F16RowConversion, ::testing::ValuesIn(supported_isas()),
                         glacier::testing::isa_param_name);

}  // namespace
}  // namespace glacier::kernels
