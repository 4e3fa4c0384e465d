// Gated FFN activations. The GELU table is built once (65536 f16 entries, 128 KiB), on first use.
#include "compute/ffn_activation.h"

#include <cmath>
#include <vector>

#include "kernels/ops.h"
#include "kernels/quant_blocks.h"

namespace glacier::compute {
namespace {

float gelu_tanh_f32(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCubicCoef = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCubicCoef * x * x)));
}

const std::vector<uint16_t>& gelu_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(1u << 16);
    for (uint32_t h = 0; h < t.size(); ++h)
      t[h] = kernels::f32_to_fp16(gelu_tanh_f32(kernels::fp16_to_f32(static_cast<uint16_t>(h))));
    return t;
  }();
  return table;
}

}  // namespace

float gelu_tanh_f16_table(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return kernels::fp16_to_f32(gelu_table()[kernels::f32_to_fp16(x)]);
}

void gated_activation(model::FfnActivation act, const float* gate, const float* up, int64_t n, float* out) {
  switch (act) {
    case model::FfnActivation::Silu:
      kernels::swiglu(gate, up, n, out);
      return;
    case model::FfnActivation::GeluTanh:
      for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh_f16_table(gate[i]) * up[i];
      return;
  }
}

}  // namespace glacier::compute
