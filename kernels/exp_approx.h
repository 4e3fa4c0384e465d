// exp(x) for float as every kernel variant computes it, so that scalar twins and SIMD variants agree to
// the bit: Cody-Waite range reduction by ln 2, a degree-7 Taylor polynomial (Horner, fma; under 1 ulp of
// error on the reduced range |r| <= ln2/2), and 2^n built from its exponent bits.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace glacier::kernels {

// The argument is clamped first: 2^n stays a normal float for n in [-126, 127].
constexpr float kExpMin = -87.0f;
constexpr float kExpMax = 88.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f;      // ln 2 to 16 bits: n * kLn2Hi is exact for |n| <= 128
constexpr float kLn2Lo = 1.42860676533018710e-6f;  // the rest of ln 2
constexpr float kExpTaylor[8] = {1.0f, 1.0f, 0.5f, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040};

inline float exp_approx(float x) {
  x = std::fmin(std::fmax(x, kExpMin), kExpMax);
  const float n = std::nearbyintf(x * kLog2e);  // ties to even, as the SIMD round instructions
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kExpTaylor[7];
  for (int k = 6; k >= 0; --k) p = std::fma(p, r, kExpTaylor[k]);
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

// Logit soft-capping (gemma2), cap * tanh(s / cap), with tanh(y) = 1 - 2 / (exp(2y) + 1) on exp_approx
// so that every variant computes the same float; off by at most a few ulps of cap from tanh itself,
// and exactly +-cap far out (the argument clamp). SIMD variants run these operations lane by lane.
inline float softcap_approx(float s, float cap, float inv_cap) {
  const float y = s * inv_cap;
  const float e = exp_approx(y + y);
  return cap * (1.0f - 2.0f / (e + 1.0f));
}

// silu(x) = x / (1 + exp(-x)) on exp_approx.
inline float silu_approx(float x) { return x / (1.0f + exp_approx(-x)); }

}  // namespace glacier::kernels
