// Scalar twins of the packed Q8_0/Q4_0 GEMM: the definition of its arithmetic (packed_gemm.h), one
// output at a time from the packed bytes. The SIMD variants compute exactly this.
#include <cmath>

#include "kernels/packed_gemm.h"
#include "kernels/quant_blocks.h"

namespace glacier::kernels {

namespace {

constexpr int kQuadBytes = 4;
constexpr int kLaneBytes = kPackRows * kQuadBytes;

// Products of element e of lane l's block with the activation quant as stored: lane-order Q8_0 weights
// are signed and the activation carries +128; block-sum Q8_0 weights carry +128 and Q4_0 nibbles +8
// (the activation's correction takes it off).
int32_t q8_0_product(const uint8_t* quads, int l, int e, int8_t x) {
  const auto w = static_cast<int8_t>(quads[(e / kQuadBytes) * kLaneBytes + l * kQuadBytes + e % kQuadBytes]);
  return int32_t{w} * (int32_t{static_cast<uint8_t>(x)} - 128);
}
int32_t q8_0_offset_product(const uint8_t* quads, int l, int e, int8_t x) {
  return int32_t{quads[(e / kQuadBytes) * kLaneBytes + l * kQuadBytes + e % kQuadBytes]} * x;
}
int32_t q4_0_product(const uint8_t* quads, int l, int e, int8_t x) {
  const int j = (e % 16) / kQuadBytes;  // elements 4j.. and 16+4j.. share zmm j
  const uint8_t byte = quads[j * kLaneBytes + l * kQuadBytes + e % kQuadBytes];
  return int32_t{e < 16 ? (byte & 0x0f) : (byte >> 4)} * x;
}

// The exact integer sum of quad q (elements 4q..4q+3) of lane l's block with the activation quants,
// plus the activation's correction for that quad.
template <int32_t (*Product)(const uint8_t*, int, int, int8_t)>
int32_t quad_isum(const uint8_t* quads, int l, const int8_t* x, int q, int32_t correction) {
  int32_t sum = correction;
  for (int k = 0; k < kQuadBytes; ++k) sum += Product(quads, l, kQuadBytes * q + k, x[kQuadBytes * q + k]);
  return sum;
}

// dot_ref.cpp's tree over the eight lane accumulators.
float hsum8(const float (&acc)[kQuadsPerBlock]) {
  float t4[4];
  for (int l = 0; l < 4; ++l) t4[l] = acc[4 + l] + acc[l];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

template <WeightType T, int32_t (*Product)(const uint8_t*, int, int, int8_t), bool kBlockSums>
void packed_gemm_ref(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end, const uint8_t* x,
                     size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  const int64_t nb = cols / kQK8_0;
  const size_t group_bytes = packed_group_bytes(T, cols), quad_bytes = packed_block_quad_bytes(T);
  for (int64_t g = g_begin; g < g_end; ++g) {
    const uint8_t* group = w + g * group_bytes;
    const uint16_t* scales = packed_group_scales(T, group, cols);
    for (int64_t r = 0; r < n_rows; ++r) {
      const PackedActivationRow a = packed_activation_row(x + r * x_row_bytes, cols);
      for (int l = 0; l < kPackRows && g * kPackRows + l < rows; ++l) {
        float lanes[kQuadsPerBlock] = {}, acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* quads = group + b * quad_bytes;
          const int8_t* xb = a.quants + b * kQK8_0;
          const float d = fp16_to_f32(scales[b * kPackRows + l]) * a.scales[b];
          if (kBlockSums) {
            int32_t isum = a.block_corrections[b];
            for (int q = 0; q < kQuadsPerBlock; ++q) isum += quad_isum<Product>(quads, l, xb, q, 0);
            acc = std::fma(static_cast<float>(isum), d, acc);
          } else {
            for (int q = 0; q < kQuadsPerBlock; ++q) {
              const int32_t isum = quad_isum<Product>(quads, l, xb, q, a.quad_corrections[b * kQuadsPerBlock + q]);
              lanes[q] = std::fma(static_cast<float>(isum), d, lanes[q]);
            }
          }
        }
        y[r * ldy + g * kPackRows + l] = kBlockSums ? acc : hsum8(lanes);
      }
    }
  }
}

}  // namespace

GLACIER_PACKED_GEMM(packed_gemm_q8_0_ref) {
  packed_gemm_ref<WeightType::Q8_0, q8_0_product, false>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(packed_gemm_q8_0_block_sums_ref) {
  packed_gemm_ref<WeightType::Q8_0, q8_0_offset_product, true>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y,
                                                               ldy);
}
GLACIER_PACKED_GEMM(packed_gemm_q4_0_ref) {
  packed_gemm_ref<WeightType::Q4_0, q4_0_product, false>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(packed_gemm_q4_0_block_sums_ref) {
  packed_gemm_ref<WeightType::Q4_0, q4_0_product, true>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}

}  // namespace glacier::kernels
