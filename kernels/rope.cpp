// RoPE. The angle is stepped by a constant factor per pair, as llama.cpp computes it (the references
// were made that way; the float rounding of the closed form differs slightly).
#include "kernels/rope.h"

#include <cmath>

namespace glacier::kernels {
namespace {
template <bool kNeox>
void rope(float* head, int32_t n_rot, int32_t pos, float base) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(pos);
  const int32_t half = n_rot / 2;
  for (int32_t i = 0; i < half; ++i) {
    const float c = std::cos(theta), s = std::sin(theta);
    float* a = kNeox ? &head[i] : &head[2 * i];
    float* b = kNeox ? &head[i + half] : &head[2 * i + 1];
    const float x0 = *a, x1 = *b;
    *a = x0 * c - x1 * s;
    *b = x0 * s + x1 * c;
    theta *= theta_scale;
  }
}
}  // namespace

void rope_normal(float* head, int32_t n_rot, int32_t pos, float base) { rope<false>(head, n_rot, pos, base); }
void rope_neox(float* head, int32_t n_rot, int32_t pos, float base) { rope<true>(head, n_rot, pos, base); }

}  // namespace glacier::kernels
