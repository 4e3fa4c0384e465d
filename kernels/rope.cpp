// RoPE. The angle is stepped by a constant factor per pair, as llama.cpp computes it (the references
// were made that way; the float rounding of the closed form differs slightly).
#include "kernels/rope.h"

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

void rope_angles(int32_t n_rot, int32_t pos, float base, float* cos_out, float* sin_out) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(pos);
  for (int32_t i = 0; i < n_rot / 2; ++i) {
    cos_out[i] = std::cos(theta);
    sin_out[i] = std::sin(theta);
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
