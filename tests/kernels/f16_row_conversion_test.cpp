// Each kernel variant's f32 -> f16 activation row conversions (DotKernels::f32_to_f16_row, and
// round_to_f16_row, which widens back) against the portable f32_to_fp16 that fp16_test.cpp checks
// against IEEE: bitwise, over every exponent and sign, the rounding ties, the subnormal and overflow
// boundaries, NaN and every tail length.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
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

class F16RowConversion : public ::testing::TestWithParam<Isa> {};

TEST_P(F16RowConversion, EveryElementIsBitwiseThePortableConversion) {
  const DotKernels& k = kernels_for(GetParam());
  ASSERT_NE(k.f32_to_f16_row, nullptr);
  const std::vector<float> in = conversion_inputs();
  std::vector<uint16_t> out(in.size());
  k.f32_to_f16_row(in.data(), out.data(), static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &in[i], 4);
    ASSERT_EQ(out[i], f32_to_fp16(in[i])) << "float bits 0x" << std::hex << u;
  }
}

TEST_P(F16RowConversion, EveryTailLengthWritesOnlyItsRow) {
  const DotKernels& k = kernels_for(GetParam());
  const std::vector<float> in = conversion_inputs();
  constexpr uint16_t kGuard = 0xabcd;
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<uint16_t> out(static_cast<size_t>(n) + 8, kGuard);
    k.f32_to_f16_row(in.data() + 1000, out.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[size_t(i)], f32_to_fp16(in[size_t(1000 + i)])) << "n " << n;
    for (size_t i = size_t(n); i < out.size(); ++i) ASSERT_EQ(out[i], kGuard) << "written past n = " << n;
  }
}

// The packed F16 GEMM's activations: each element rounded to f16 and widened back, bit for bit the
// portable pair (NaN included: the comparison is of the bits), and nothing written past the row.
TEST_P(F16RowConversion, RoundingThroughF16IsBitwiseThePortablePair) {
  const DotKernels& k = kernels_for(GetParam());
  ASSERT_NE(k.round_to_f16_row, nullptr);
  const std::vector<float> in = conversion_inputs();
  std::vector<float> out(in.size());
  k.round_to_f16_row(in.data(), out.data(), static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(fp16_to_f32(f32_to_fp16(in[i]))))
        << "float bits 0x" << std::hex << std::bit_cast<uint32_t>(in[i]);
  constexpr float kGuard = -1234.5f;
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<float> row(static_cast<size_t>(n) + 8, kGuard);
    k.round_to_f16_row(in.data() + 1000, row.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(row[size_t(i)]), std::bit_cast<uint32_t>(fp16_to_f32(f32_to_fp16(in[size_t(1000 + i)]))))
          << "n " << n;
    for (size_t i = size_t(n); i < row.size(); ++i) ASSERT_EQ(row[i], kGuard) << "written past n = " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, F16RowConversion, ::testing::ValuesIn(supported_isas()),
                         glacier::testing::isa_param_name);

}  // namespace
}  // namespace glacier::kernels
