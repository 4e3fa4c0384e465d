// Row dequantization for every weight type, following the block layouts in quant_blocks.h.
#include "kernels/dequantize.h"

#include <cstring>

#include "kernels/k_quant_layout.h"
#include "kernels/quant_blocks.h"
#include "util/error.h"

namespace glacier::kernels {

namespace {

// Q4_K/Q5_K: x = (d * scale) * q - dmin * min per 32-element sub-block.
template <class Block>
void dequantize_k4(const Block* b, int64_t n, int (*level)(const Block&, int), float* out) {
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    for (int s = 0; s < 8; ++s) {
      int scale, min;
      k4_scale_min(b[i].scales, s, scale, min);
      const float ds = d * static_cast<float>(scale), ms = dmin * static_cast<float>(min);
      for (int j = 32 * s; j < 32 * s + 32; ++j)
        out[i * kQK_K + j] = ds * static_cast<float>(level(b[i], j)) - ms;
    }
  }
}

}  // namespace

void dequantize_row(const Matrix& w, int64_t row, float* out) {
  GLACIER_ASSERT(row >= 0 && row < w.rows, "row index within the matrix");
  const uint8_t* src = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(row) * w.row_bytes;
  const int64_t n = w.cols;
  switch (w.type) {
    case WeightType::F32:
      std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case WeightType::F16:
    case WeightType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = w.type == WeightType::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    case WeightType::Q8_0: {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n / kQK8_0; ++i) {
        const float d = fp16_to_f32(b[i].d);
        for (int j = 0; j < kQK8_0; ++j) out[i * kQK8_0 + j] = d * static_cast<float>(b[i].qs[j]);
      }
      return;
    }
    case WeightType::Q4_0: {
      const auto* b = reinterpret_cast<const BlockQ4_0*>(src);
      for (int64_t i = 0; i < n / kQK4_0; ++i) {
        const float d = fp16_to_f32(b[i].d);
        for (int j = 0; j < kQK4_0 / 2; ++j) {
          out[i * kQK4_0 + j] = d * static_cast<float>((b[i].qs[j] & 0x0f) - 8);
          out[i * kQK4_0 + j + kQK4_0 / 2] = d * static_cast<float>((b[i].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    case WeightType::Q4_1: {
      const auto* b = reinterpret_cast<const BlockQ4_1*>(src);
      for (int64_t i = 0; i < n / kQK8_0; ++i)
        for (int j = 0; j < kQK8_0; ++j)
          out[i * kQK8_0 + j] = fp16_to_f32(b[i].d) * static_cast<float>(nibble_level(b[i].qs, j)) + fp16_to_f32(b[i].m);
      return;
    }
    case WeightType::Q5_0: {
      const auto* b = reinterpret_cast<const BlockQ5_0*>(src);
      for (int64_t i = 0; i < n / kQK8_0; ++i)
        for (int j = 0; j < kQK8_0; ++j)
          out[i * kQK8_0 + j] = fp16_to_f32(b[i].d) * static_cast<float>(q5_level(b[i], j) - 16);
      return;
    }
    case WeightType::Q5_1: {
      const auto* b = reinterpret_cast<const BlockQ5_1*>(src);
      for (int64_t i = 0; i < n / kQK8_0; ++i)
        for (int j = 0; j < kQK8_0; ++j)
          out[i * kQK8_0 + j] = fp16_to_f32(b[i].d) * static_cast<float>(q5_level(b[i], j)) + fp16_to_f32(b[i].m);
      return;
    }
    case WeightType::IQ4_NL: {
      const auto* b = reinterpret_cast<const BlockIQ4_NL*>(src);
      for (int64_t i = 0; i < n / kQK8_0; ++i)
        for (int j = 0; j < kQK8_0; ++j)
          out[i * kQK8_0 + j] = fp16_to_f32(b[i].d) * static_cast<float>(kIQ4NLValues[nibble_level(b[i].qs, j)]);
      return;
    }
    case WeightType::IQ4_XS: {
      const auto* b = reinterpret_cast<const BlockIQ4_XS*>(src);
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = fp16_to_f32(b[i].d);
        for (int j = 0; j < kQK_K; ++j)
          out[i * kQK_K + j] = d * static_cast<float>(iq4_xs_scale(b[i], j / 32)) * static_cast<float>(iq4_xs_level(b[i], j));
      }
      return;
    }
    case WeightType::Q2_K: {
      const auto* b = reinterpret_cast<const BlockQ2_K*>(src);
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
        for (int j = 0; j < kQK_K; ++j) {
          const uint8_t sm = b[i].scales[j / 16];
          out[i * kQK_K + j] = d * static_cast<float>(sm & 0x0f) * static_cast<float>(q2_k_level(b[i], j)) -
                               dmin * static_cast<float>(sm >> 4);
        }
      }
      return;
    }
    case WeightType::Q3_K: {
      const auto* b = reinterpret_cast<const BlockQ3_K*>(src);
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = fp16_to_f32(b[i].d);
        for (int j = 0; j < kQK_K; ++j)
          out[i * kQK_K + j] = d * static_cast<float>(q3_k_scale(b[i], j / 16)) * static_cast<float>(q3_k_level(b[i], j));
      }
      return;
    }
    case WeightType::Q4_K:
      dequantize_k4(reinterpret_cast<const BlockQ4_K*>(src), n, q4_k_level, out);
      return;
    case WeightType::Q5_K:
      dequantize_k4(reinterpret_cast<const BlockQ5_K*>(src), n, q5_k_level, out);
      return;
    case WeightType::Q6_K: {
      const auto* b = reinterpret_cast<const BlockQ6_K*>(src);
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = fp16_to_f32(b[i].d);
        // (d * scale) * q, left to right, as ggml's row dequantizer rounds it.
        for (int j = 0; j < kQK_K; ++j)
          out[i * kQK_K + j] = d * static_cast<float>(b[i].scales[j / 16]) * static_cast<float>(q6_k_level(b[i], j));
      }
      return;
    }
  }
  GLACIER_ASSERT(false, "unhandled weight type");
}

}  // namespace glacier::kernels
