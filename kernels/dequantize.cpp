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

// Element j of each block of kElements by element(block, j): the walk every type without sub-block
// scales shares.
template <class Block, int kElements, class Element>
void dequantize_blocks(const uint8_t* src, int64_t n, float* out, Element element) {
  const auto* b = reinterpret_cast<const Block*>(src);
  for (int64_t i = 0; i < n / kElements; ++i)
    for (int j = 0; j < kElements; ++j) out[i * kElements + j] = element(b[i], j);
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
    case WeightType::Q8_0:
      return dequantize_blocks<BlockQ8_0, kQK8_0>(src, n, out, [](const BlockQ8_0& b, int j) {
        return fp16_to_f32(b.d) * static_cast<float>(b.qs[j]);
      });
    case WeightType::Q4_0:
      return dequantize_blocks<BlockQ4_0, kQK4_0>(src, n, out, [](const BlockQ4_0& b, int j) {
        return fp16_to_f32(b.d) * static_cast<float>(nibble_level(b.qs, j) - 8);
      });
    case WeightType::Q4_1:
      return dequantize_blocks<BlockQ4_1, kQK8_0>(src, n, out, [](const BlockQ4_1& b, int j) {
        return fp16_to_f32(b.d) * static_cast<float>(nibble_level(b.qs, j)) + fp16_to_f32(b.m);
      });
    case WeightType::Q5_0:
      return dequantize_blocks<BlockQ5_0, kQK8_0>(src, n, out, [](const BlockQ5_0& b, int j) {
        return fp16_to_f32(b.d) * static_cast<float>(q5_level(b, j) - 16);
      });
    case WeightType::Q5_1:
      return dequantize_blocks<BlockQ5_1, kQK8_0>(src, n, out, [](const BlockQ5_1& b, int j) {
        return fp16_to_f32(b.d) * static_cast<float>(q5_level(b, j)) + fp16_to_f32(b.m);
      });
    case WeightType::IQ4_NL:
      return dequantize_blocks<BlockIQ4_NL, kQK8_0>(src, n, out, [](const BlockIQ4_NL& b, int j) {
        return fp16_to_f32(b.d) * static_cast<float>(kIQ4NLValues[nibble_level(b.qs, j)]);
      });
    case WeightType::IQ4_XS:
      return dequantize_blocks<BlockIQ4_XS, kQK_K>(src, n, out, [](const BlockIQ4_XS& b, int j) {
        return fp16_to_f32(b.d) * static_cast<float>(iq4_xs_scale(b, j / 32)) * static_cast<float>(iq4_xs_level(b, j));
      });
    case WeightType::Q2_K:
      return dequantize_blocks<BlockQ2_K, kQK_K>(src, n, out, [](const BlockQ2_K& b, int j) {
        const uint8_t sm = b.scales[j / 16];
        return fp16_to_f32(b.d) * static_cast<float>(sm & 0x0f) * static_cast<float>(q2_k_level(b, j)) -
               fp16_to_f32(b.dmin) * static_cast<float>(sm >> 4);
      });
    case WeightType::Q3_K:
      return dequantize_blocks<BlockQ3_K, kQK_K>(src, n, out, [](const BlockQ3_K& b, int j) {
        return fp16_to_f32(b.d) * static_cast<float>(q3_k_scale(b, j / 16)) * static_cast<float>(q3_k_level(b, j));
      });
    case WeightType::Q4_K:
      return dequantize_k4(reinterpret_cast<const BlockQ4_K*>(src), n, q4_k_level, out);
    case WeightType::Q5_K:
      return dequantize_k4(reinterpret_cast<const BlockQ5_K*>(src), n, q5_k_level, out);
    case WeightType::Q6_K:
      // (d * scale) * q, left to right, as ggml's row dequantizer rounds it.
      return dequantize_blocks<BlockQ6_K, kQK_K>(src, n, out, [](const BlockQ6_K& b, int j) {
        return fp16_to_f32(b.d) * static_cast<float>(b.scales[j / 16]) * static_cast<float>(q6_k_level(b, j));
      });
  }
  GLACIER_ASSERT(false, "unhandled weight type");
}

}  // namespace glacier::kernels
