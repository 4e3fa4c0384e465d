// Weight row encoders: scalar code, run once per weight when a model file is written, so speed
// matters far less than producing exactly the blocks other GGUF tools produce.
#include "kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "util/error.h"

namespace glacier::kernels {

size_t encoded_bytes(WeightType t, int64_t n) {
  GLACIER_ASSERT(n >= 0, "element count is negative");
  const size_t count = static_cast<size_t>(n);
  switch (t) {
    case WeightType::F32: return count * 4;
    case WeightType::F16:
    case WeightType::BF16: return count * 2;
    case WeightType::Q8_0:
      GLACIER_ASSERT(n % kQK8_0 == 0, "q8_0 row length is not a multiple of 32");
      return count / kQK8_0 * sizeof(BlockQ8_0);
    case WeightType::Q4_0:
      GLACIER_ASSERT(n % kQK4_0 == 0, "q4_0 row length is not a multiple of 32");
      return count / kQK4_0 * sizeof(BlockQ4_0);
    case WeightType::Q4_K:
    case WeightType::Q5_K:
    case WeightType::Q6_K: {
      GLACIER_ASSERT(n % kQK_K == 0, "k-quant row length is not a multiple of 256");
      const size_t block = t == WeightType::Q4_K ? sizeof(BlockQ4_K)
                           : t == WeightType::Q5_K ? sizeof(BlockQ5_K) : sizeof(BlockQ6_K);
      return count / kQK_K * block;
    }
  }
  GLACIER_ASSERT(false, "unknown weight type");
  return 0;
}

void encode_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  GLACIER_ASSERT(n % kQK8_0 == 0, "q8_0 row length is not a multiple of 32");
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    // Dividing by d would round differently in a few cases; the reference multiplies by 1/d.
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    for (int j = 0; j < kQK8_0; ++j) y[b].qs[j] = static_cast<int8_t>(std::round(xb[j] * inv_d));
  }
}

void encode_row_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  GLACIER_ASSERT(n % kQK4_0 == 0, "q4_0 row length is not a multiple of 32");
  constexpr int kHalf = kQK4_0 / 2;
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float* xb = x + b * kQK4_0;
    float amax = 0.0f;
    float signed_max = 0.0f;
    for (int j = 0; j < kQK4_0; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        signed_max = xb[j];
      }
    }
    // Mapping the extreme element to -8 (not +7) uses the asymmetric range's extra level.
    const float d = signed_max / -8.0f;
    const float inv_d = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    auto level = [&](float v) {
      const int q = static_cast<int>(std::floor(v * inv_d + 8.5f));
      return static_cast<uint8_t>(std::clamp(q, 0, 15));
    };
    for (int j = 0; j < kHalf; ++j)
      y[b].qs[j] = static_cast<uint8_t>(level(xb[j]) | (level(xb[j + kHalf]) << 4));
  }
}

void encode_row_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_fp16(x[i]);
}

void encode_row_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

void encode_row(WeightType t, const float* x, void* out, int64_t n) {
  switch (t) {
    case WeightType::F32:
      std::memcpy(out, x, encoded_bytes(t, n));
      return;
    case WeightType::F16:
      encode_row_f16(x, static_cast<uint16_t*>(out), n);
      return;
    case WeightType::BF16:
      encode_row_bf16(x, static_cast<uint16_t*>(out), n);
      return;
    case WeightType::Q8_0:
      encode_row_q8_0(x, static_cast<BlockQ8_0*>(out), n);
      return;
    case WeightType::Q4_0:
      encode_row_q4_0(x, static_cast<BlockQ4_0*>(out), n);
      return;
    case WeightType::Q4_K:
    case WeightType::Q5_K:
    case WeightType::Q6_K:
      // K-quant files come from llama-quantize; writing them needs its scale search, not done here.
      GLACIER_ASSERT(false, std::string("no encoder for ") + weight_type_name(t) + " weights");
      return;
  }
  GLACIER_ASSERT(false, "unknown weight type");
}

}  // namespace glacier::kernels
