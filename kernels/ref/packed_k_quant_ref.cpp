// Scalar twins of the packed K-quant GEMM (packed_k_quant.h): one output at a time from the packed bytes,
// in the arithmetic of ref/dot_k_quant_ref.cpp (the same integer per super-block, the same float fusing
// order), so every packed variant equals the row-by-row dots bit for bit.
#include <cmath>

#include "kernels/packed_k_quant.h"
#include "kernels/quant_blocks.h"

namespace glacier::kernels {

namespace {

constexpr int kQuadBytes = kKQuantQuadBytes;
constexpr int kVector = kKQuantQuadVector;

// Byte k of quad q of lane l in the 8 quad vectors starting at v.
uint8_t quad_byte(const uint8_t* v, int q, int l, int k) { return v[q * kVector + l * kQuadBytes + k]; }

// Element i (0..255) of lane l in a packed super-block sb: the level as the dots see it. Its byte is t = i % 4
// of quad (i % 16) / 4 of sub-block i / 32, high nibble for (i % 32) >= 16.
int q4_k_level(const uint8_t* sb, const KQuantPackedLayout& lay, int l, int i) {
  const int s = i / 32, high = (i % 32) / 16, q = (i % 16) / kQuadBytes, t = i % kQuadBytes;
  const uint8_t byte = quad_byte(sb + lay.qs + s * kK4QuadsPerSubBlock * kVector, q, l, t);
  return high ? byte >> 4 : byte & 0x0f;
}
int q5_k_level(const uint8_t* sb, const KQuantPackedLayout& lay, int l, int i) {
  const int s = i / 32, high = (i % 32) / 16, q = (i % 16) / kQuadBytes, t = i % kQuadBytes;
  const uint8_t bits = quad_byte(sb + lay.qh + high * kK4QuadsPerSubBlock * kVector, q, l, t);
  return q4_k_level(sb, lay, l, i) | (((bits >> s) & 1) << 4);
}
int q6_k_level(const uint8_t* sb, const KQuantPackedLayout& lay, int l, int i) {
  const int h = i / 128, k = (i % 128) / 32, e = i % 32;
  auto byte = [&](int j) { return quad_byte(sb + lay.qs + (h * 3 + j) * 8 * kVector, e / kQuadBytes, l, e % kQuadBytes); };
  const int u = k < 3 ? byte(k) & 0x3f : (byte(0) >> 6) | ((byte(1) >> 6) << 2) | ((byte(2) >> 6) << 4);
  return u - 32;
}

float factor(const uint8_t* sb, size_t offset, int l) {
  return fp16_to_f32(reinterpret_cast<const uint16_t*>(sb + offset)[l]);
}

int32_t sub_block_sum(const BlockQ8_K& x, int s) { return int32_t{x.bsums[2 * s]} + int32_t{x.bsums[2 * s + 1]}; }

// dot_q4_k_q8_k_ref and dot_q5_k_q8_k_ref on lane l of a packed group.
template <int (*Level)(const uint8_t*, const KQuantPackedLayout&, int, int)>
float k4_output(const uint8_t* group, const KQuantPackedLayout& lay, int64_t nsb, int l, const BlockQ8_K* x) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* sb = group + b * lay.super_block_bytes;
    int32_t levels = 0, mins = 0;
    for (int s = 0; s < 8; ++s) {
      int32_t sum = 0;
      for (int e = 0; e < 32; ++e) sum += Level(sb, lay, l, 32 * s + e) * int32_t{x[b].qs[32 * s + e]};
      levels += sb[lay.scales + s * kPackRows + l] * sum;
      mins += sb[lay.mins + (s / 2) * 2 * kPackRows + 2 * l + s % 2] * sub_block_sum(x[b], s);
    }
    acc = std::fma(x[b].d * factor(sb, lay.d, l), static_cast<float>(levels), acc);
    acc = std::fma(-x[b].d * factor(sb, lay.dmin, l), static_cast<float>(mins), acc);
  }
  return acc;
}

// dot_q6_k_q8_k_ref on lane l.
float q6_k_output(const uint8_t* group, const KQuantPackedLayout& lay, int64_t nsb, int l, const BlockQ8_K* x) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* sb = group + b * lay.super_block_bytes;
    int32_t levels = 0;
    for (int s = 0; s < 16; ++s) {
      int32_t sum = 0;
      for (int e = 0; e < 16; ++e) sum += q6_k_level(sb, lay, l, 16 * s + e) * int32_t{x[b].qs[16 * s + e]};
      levels += static_cast<int8_t>(sb[lay.scales + s * kPackRows + l]) * sum;
    }
    acc = std::fma(x[b].d * factor(sb, lay.d, l), static_cast<float>(levels), acc);
  }
  return acc;
}

template <WeightType T>
void packed_k_gemm_ref(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end, const uint8_t* x,
                       size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy) {
  const KQuantPackedLayout lay = k_quant_packed_layout(T);
  const size_t group_bytes = k_quant_packed_group_bytes(T, cols);
  const int64_t nsb = cols / kQK_K;
  for (int64_t g = g_begin; g < g_end; ++g) {
    const uint8_t* group = w + g * group_bytes;
    for (int64_t r = 0; r < n_rows; ++r) {
      const auto* xr = reinterpret_cast<const BlockQ8_K*>(x + r * x_row_bytes);
      for (int l = 0; l < kPackRows && g * kPackRows + l < rows; ++l) {
        float out;
        if constexpr (T == WeightType::Q4_K) out = k4_output<q4_k_level>(group, lay, nsb, l, xr);
        else if constexpr (T == WeightType::Q5_K) out = k4_output<q5_k_level>(group, lay, nsb, l, xr);
        else out = q6_k_output(group, lay, nsb, l, xr);
        y[r * ldy + g * kPackRows + l] = out;
      }
    }
  }
}

}  // namespace

GLACIER_PACKED_GEMM(packed_gemm_q4_k_ref) {
  packed_k_gemm_ref<WeightType::Q4_K>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(packed_gemm_q5_k_ref) {
  packed_k_gemm_ref<WeightType::Q5_K>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(packed_gemm_q6_k_ref) {
  packed_k_gemm_ref<WeightType::Q6_K>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}

}  // namespace glacier::kernels
