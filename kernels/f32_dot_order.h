// The f32 dot product in the summation order of ggml-cpu's AVX-512 build (the build the shared
// references were made with): 4 accumulators of 16 lanes with FMA over 64-element steps, a fixed
// reduction tree, and the tail fused in float. Small models are sensitive to it: a different order
// moves a later Q8_0 rounding and a logit by ~0.3. Every variant computes exactly this.
#pragma once
#include <cmath>
#include <cstdint>

namespace glacier::kernels {

constexpr int64_t kF32DotStep = 64;  // elements per step: 4 accumulators x 16 lanes

// Reduction of the four 16-lane accumulators: (a0 + a2) + (a1 + a3) per lane, then halves added
// 16 -> 8 -> 4, then lanes (0 + 2) + (1 + 3).
[[gnu::always_inline]] inline float reduce_f32_lanes(const float (&r)[16]) {
  float t8[8], t4[4];
  for (int l = 0; l < 8; ++l) t8[l] = r[8 + l] + r[l];
  for (int l = 0; l < 4; ++l) t4[l] = t8[4 + l] + t8[l];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

// The tail after the last full step: a float sum, each product fused into it (the compiler contracts
// ggml's `sum += x*y` into an FMA in a native build).
[[gnu::always_inline]] inline float finish_f32_dot(float lanes_sum, const float* w, const float* x, int64_t from,
                                                   int64_t n) {
  float sum = lanes_sum;
  for (int64_t i = from; i < n; ++i) sum = std::fma(w[i], x[i], sum);
  return sum;
}

// Portable form (the reference twin).
inline float dot_f32_ggml_order(const float* w, const float* x, int64_t n) {
  const int64_t np = n - n % kF32DotStep;
  float acc[4][16] = {};
  for (int64_t i = 0; i < np; i += kF32DotStep)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 16; ++l) acc[j][l] = std::fma(w[i + 16 * j + l], x[i + 16 * j + l], acc[j][l]);
  float r[16];
  for (int l = 0; l < 16; ++l) r[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  return finish_f32_dot(np ? reduce_f32_lanes(r) : 0.0f, w, x, np, n);
}

}  // namespace glacier::kernels
