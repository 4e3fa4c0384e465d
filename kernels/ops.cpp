// Portable transformer element-wise ops (see ops.h): fixed evaluation orders, libm expf.
#include "kernels/ops.h"

#include <cmath>

#include "kernels/dispatch.h"
#include "kernels/exp_approx.h"
#include "util/error.h"

namespace glacier::kernels {

namespace {

// Sum of squares with 8 interleaved float partial sums combined pairwise: a fixed order that the
// compiler can keep in vector lanes, faster than one serial chain and still deterministic.
float sum_of_squares(const float* x, int64_t n) {
  constexpr int kLanes = 8;
  float part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) part[l] += x[i + l] * x[i + l];
  for (int64_t j = i; j < n; ++j) part[j - i] += x[j] * x[j];
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) part[l] += part[l + width];
  return part[0];
}

}  // namespace

void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  GLACIER_ASSERT(n > 0, "rmsnorm of an empty row");
  const float mean = sum_of_squares(x, n) / static_cast<float>(n);
  const float inv_rms = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv_rms * weight[i];
}

void softmax(float* x, int64_t n) {
  GLACIER_ASSERT(n > 0, "softmax of an empty row");
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::fmax(max, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv_sum = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv_sum;
}

float silu(float x) { return silu_approx(x); }

void swiglu(const float* gate, const float* up, int64_t n, float* out) { active_kernels().swiglu(gate, up, n, out); }

void add(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void axpy(float alpha, const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void scale(float s, int64_t n, float* x) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

float dot_f32(const float* a, const float* b, int64_t n) { return active_kernels().f32_f32(a, b, n); }

}  // namespace glacier::kernels
