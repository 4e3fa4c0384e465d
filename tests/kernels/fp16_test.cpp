// Half-precision conversions: all 65536 halves decode to the IEEE value and round-trip, every
// rounding boundary between neighbouring halves rounds to nearest-even, and bf16 rounding cases.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/quant_blocks.h"

namespace glacier::kernels {
namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// The value a half encodes, from the IEEE 754 binary16 definition (independent of fp16.cpp).
double half_value(uint16_t h) {
  const int sign = (h & 0x8000) ? -1 : 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  if (exponent == 0x1f) return mantissa ? std::nan("") : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

TEST(Fp16, EveryHalfDecodesToItsValueAndRoundTrips) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = fp16_to_f32(h);
    const double expected = half_value(h);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(f)) << "half 0x" << std::hex << i;
      ASSERT_EQ(bits(f) >> 31, i >> 15) << "NaN sign, half 0x" << std::hex << i;
      // Converting back keeps sign and payload and sets the quiet bit (as F16C does).
      ASSERT_EQ(f32_to_fp16(f), h | 0x0200) << "half 0x" << std::hex << i;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), expected) << "half 0x" << std::hex << i;
    ASSERT_EQ(std::signbit(f), (i & 0x8000) != 0) << "half 0x" << std::hex << i;
    ASSERT_EQ(f32_to_fp16(f), h) << "half 0x" << std::hex << i;
  }
}

TEST(Fp16, RoundsToNearestEvenBetweenEveryPairOfNeighbours) {
  for (uint16_t lo = 0; lo < 0x7bff; ++lo) {
    const uint16_t hi = static_cast<uint16_t>(lo + 1);
    // Halves have 11 significant bits, so the midpoint (12 bits) is exact in float.
    const float mid = static_cast<float>((half_value(lo) + half_value(hi)) / 2);
    const uint16_t even = (lo & 1) ? hi : lo;
    for (int sign = 0; sign < 2; ++sign) {
      const float s = sign ? -1.0f : 1.0f;
      const uint16_t sb = sign ? 0x8000 : 0;
      ASSERT_EQ(f32_to_fp16(s * mid), even | sb) << "tie above half 0x" << std::hex << lo;
      ASSERT_EQ(f32_to_fp16(s * std::nextafter(mid, 0.0f)), lo | sb) << "below tie 0x" << std::hex << lo;
      ASSERT_EQ(f32_to_fp16(s * std::nextafter(mid, INFINITY)), hi | sb) << "above tie 0x" << std::hex << lo;
    }
  }
}

TEST(Fp16, OverflowUnderflowAndSpecials) {
  EXPECT_EQ(f32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7c00);  // tie with odd 0x7bff goes up, to infinity
  EXPECT_EQ(f32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_fp16(-INFINITY), 0xfc00);
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie with zero goes to even zero
  EXPECT_EQ(f32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_fp16(-1e-30f), 0x8000);
  EXPECT_EQ(f32_to_fp16(from_bits(0x7f800001)) & 0x7e00, 0x7e00);  // signalling NaN quietened
}

TEST(Bf16, RoundingCases) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808000)), 0x3f80);  // tie, lower neighbour even: stays
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f818000)), 0x3f82);  // tie, lower neighbour odd: goes up
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001)), 0x3f81);  // above the tie
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f807fff)), 0x3f80);  // below the tie
  EXPECT_EQ(f32_to_bf16(from_bits(0xbf818000)), 0xbf82);  // negative ties mirror
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f7fffff)), 0x7f80);  // largest float rounds to infinity
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00018000)), 0x0002);  // subnormal tie rounds to even
  const uint16_t nan = f32_to_bf16(from_bits(0x7f800001));  // payload only in dropped bits
  EXPECT_TRUE(std::isnan(bf16_to_f32(nan)));
  for (uint32_t i = 0; i < 65536; ++i) {
    const float f = bf16_to_f32(static_cast<uint16_t>(i));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), i) << "bf16 0x" << std::hex << i;
  }
}

}  // namespace
}  // namespace glacier::kernels
