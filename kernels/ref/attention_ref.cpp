// Scalar twins of the attention and SwiGLU kernels: the arithmetic of attention.h written out one
// element at a time. The SIMD variants perform the same operations lane by lane.
#include <algorithm>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/exp_approx.h"

namespace glacier::kernels {

namespace {

// attention.h's tree16: c_i + c_{i+8}, then +4, +2, +1.
float tree16(float (&c)[kKeyTile]) {
  for (int width = kKeyTile / 2; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) c[i] = c[i + width] + c[i];
  return c[0];
}

}  // namespace

void attend_ref(const AttentionArgs& a) {
  const int32_t n = a.last + 1 - a.first;
  for (int32_t h = 0; h < a.n_q; ++h) {
    const float* q = a.q + h * a.q_stride;
    float* s = a.scores + static_cast<size_t>(h) * (n + kKeyTile);
    float m = -INFINITY;
    for (int32_t i = 0; i < n; ++i) {
      const int32_t t = a.first + i;
      const float* tile = a.key_tiles + static_cast<size_t>(t / kKeyTile) * a.tile_stride;
      float c[kKeyTile] = {};
      for (int32_t d = 0; d < a.hd; ++d) c[d % kKeyTile] = std::fma(q[d], tile[d * kKeyTile + t % kKeyTile], c[d % kKeyTile]);
      s[i] = tree16(c) * a.scale;
      if (a.softcap > 0.0f) s[i] = softcap_approx(s[i], a.softcap, 1.0f / a.softcap);
      m = std::fmax(m, s[i]);
    }
    for (int32_t i = 0; i < n; ++i) s[i] = exp_approx(s[i] - m);
    double sum = 0.0;
    for (int32_t chunk = a.first / kKeyTile; chunk <= a.last / kKeyTile; ++chunk) {
      float c[kKeyTile] = {};
      for (int j = 0; j < kKeyTile; ++j) {
        const int32_t t = chunk * kKeyTile + j;
        if (t >= a.first && t <= a.last) c[j] = s[t - a.first];
      }
      sum += static_cast<double>(tree16(c));
    }
    const float inv = static_cast<float>(1.0 / sum);
    float* out = a.out + h * a.out_stride;
    for (int32_t d = 0; d < a.hd; ++d) {
      float c[kKeyTile] = {};
      for (int32_t t = a.first; t <= a.last; ++t) {
        const float* tile = a.value_tiles + static_cast<size_t>(t / kKeyTile) * a.tile_stride;
        c[t % kKeyTile] = std::fma(s[t - a.first] * inv, tile[d * kKeyTile + t % kKeyTile], c[t % kKeyTile]);
      }
      out[d] = tree16(c);
    }
  }
}

double sum_exp_ref(const float* x, int64_t n, float shift) {
  double sum = 0.0;
  for (int64_t c0 = 0; c0 < n; c0 += kKeyTile) {
    float c[kKeyTile] = {};
    for (int64_t i = c0; i < n && i < c0 + kKeyTile; ++i) c[i - c0] = exp_approx(x[i] - shift);
    sum += static_cast<double>(tree16(c));
  }
  return sum;
}

void swiglu_ref(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu_approx(gate[i]) * up[i];
}

}  // namespace glacier::kernels
