// RoPE. The angle is stepped by a constant factor per pair, as llama.cpp computes it (the references
// were made that way; the float rounding of the closed form differs slightly).
#include "kernels/rope.h"

#include <algorithm>
#include <cmath>

namespace glacier::kernels {
namespace {
template <bool kNeox>
void apply(float* head, int32_t n_rot, const float* cos_in, const float* sin_in) {
  const int32_t half = n_rot / 2;
  for (int32_t i = 0; i < half; ++i) {
    const float c = cos_in[i], s = sin_in[i];
    float* a = kNeox ? &head[i] : &head[2 * i];
    float* b = kNeox ? &head[i + half] : &head[2 * i + 1];
    const float x0 = *a, x1 = *b;
    *a = x0 * c - x1 * s;
    *b = x0 * s + x1 * c;
  }
}
}  // namespace

void rope_angles(const RopeParams& p, int32_t pos, float* cos_out, float* sin_out) {
  const float theta_scale = std::pow(p.base, -2.0f / static_cast<float>(p.n_rot));
  float mscale = p.mscale;
  if (p.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  float theta = static_cast<float>(pos);
  for (int32_t i = 0; i < p.n_rot / 2; ++i) {
    const float extrapolated = p.freq_factors ? theta / p.freq_factors[i] : theta;
    float angle = p.freq_scale * extrapolated;
    if (p.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - p.corr_low) / std::max(0.001f, p.corr_high - p.corr_low);
      const float r = p.ext_factor * (1.0f - std::min(1.0f, std::max(0.0f, y)));
      angle = angle * (1.0f - r) + extrapolated * r;
    }
    cos_out[i] = std::cos(angle) * mscale;
    sin_out[i] = std::sin(angle) * mscale;
    theta *= theta_scale;
  }
}

void rope_apply_normal(float* head, int32_t n_rot, const float* cos_in, const float* sin_in) {
  apply<false>(head, n_rot, cos_in, sin_in);
}
void rope_apply_neox(float* head, int32_t n_rot, const float* cos_in, const float* sin_in) {
  apply<true>(head, n_rot, cos_in, sin_in);
}

}  // namespace glacier::kernels
