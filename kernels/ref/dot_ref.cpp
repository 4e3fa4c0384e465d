// Scalar reference twins of every dot kernel: the semantics each SIMD variant is tested against.
// Q8_0/Q4_0 follow ggml-cpu's math (per-block float scale times exact integer sum, float accumulator).
// f32 sums in float; f16 and bf16 sum their (exact) products in double, so the reference is the
// accurate side of every comparison.
#include <cmath>

#include "kernels/dispatch.h"

namespace glacier::kernels {

namespace {

float dot_f32_ref(const float* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

float dot_f16_ref(const uint16_t* w, const uint16_t* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(fp16_to_f32(w[i])) * static_cast<double>(fp16_to_f32(x[i]));
  return static_cast<float>(sum);
}

float dot_bf16_ref(const uint16_t* w, const uint16_t* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(bf16_to_f32(w[i])) * static_cast<double>(bf16_to_f32(x[i]));
  return static_cast<float>(sum);
}

float dot_q8_0_ref(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQK8_0; ++j) isum += int32_t{w[b].qs[j]} * int32_t{x[b].qs[j]};
    sum += (fp16_to_f32(w[b].d) * fp16_to_f32(x[b].d)) * static_cast<float>(isum);
  }
  return sum;
}

float dot_q4_0_ref(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n) {
  float sum = 0.0f;
  constexpr int kHalf = kQK4_0 / 2;
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kHalf; ++j) {
      const int32_t low = (w[b].qs[j] & 0x0f) - 8;
      const int32_t high = (w[b].qs[j] >> 4) - 8;
      isum += low * x[b].qs[j] + high * x[b].qs[j + kHalf];
    }
    sum += (fp16_to_f32(w[b].d) * fp16_to_f32(x[b].d)) * static_cast<float>(isum);
  }
  return sum;
}

void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = q8_inverse_scale(d);
    y[b].d = f32_to_fp16(d);
    // roundf rounds half away from zero; the SIMD variants reproduce exactly this.
    for (int j = 0; j < kQK8_0; ++j) y[b].qs[j] = static_cast<int8_t>(std::roundf(xb[j] * id));
  }
}

// The reference tile is the definition of "same as the single-row dot": it calls it.
template <typename W, typename X, float (*Dot)(const W*, const X*, int64_t)>
void tile_by_rows(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out,
                  int64_t out_stride) {
  const auto* xb = static_cast<const unsigned char*>(x);
  for (int i = 0; i < nx; ++i)
    out[i * out_stride] =
        Dot(static_cast<const W*>(w), reinterpret_cast<const X*>(xb + i * x_stride), n);
}

}  // namespace

const DotKernels& ref_kernels() {
  static const DotKernels table{
      dot_f32_ref,
      dot_f16_ref,
      dot_bf16_ref,
      dot_q8_0_ref,
      dot_q4_0_ref,
      quantize_row_q8_0_ref,
      tile_by_rows<float, float, dot_f32_ref>,
      tile_by_rows<uint16_t, uint16_t, dot_f16_ref>,
      tile_by_rows<uint16_t, uint16_t, dot_bf16_ref>,
      tile_by_rows<BlockQ8_0, BlockQ8_0, dot_q8_0_ref>,
      tile_by_rows<BlockQ4_0, BlockQ8_0, dot_q4_0_ref>,
  };
  return table;
}

}  // namespace glacier::kernels
