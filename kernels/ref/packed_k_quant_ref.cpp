// Scalar twins of the packed K-quant GEMM (packed_k_quant.h): one output at a time from the packed bytes,
// in the arithmetic of ref/dot_k_quant_ref.cpp (the same integer lanes, the same float fusing order), so
// every packed variant equals the row-by-row dots bit for bit.
#include <cmath>

#include "kernels/packed_k_quant.h"
#include "kernels/quant_blocks.h"

namespace glacier::kernels {

namespace {

constexpr int kQuadBytes = 4;
constexpr int kVector = kPackRows * kQuadBytes;

// Byte k of quad q of lane l in the 8 quad vectors starting at v.
uint8_t quad_byte(const uint8_t* v, int q, int l, int k) { return v[q * kVector + l * kQuadBytes + k]; }

// Element i (0..255) of lane l in a packed super-block sb: the level as the dots see it. Its byte in
// chunk c, quad q: t = 2 * (sub-block % 2) + e % 2 for element e of the quad, high nibble for e >= 2.
int q4_k_level(const uint8_t* sb, const KQuantPackedLayout& lay, int l, int i) {
  const int c = i / 64, half = (i % 64) / 32, q = (i % 32) / kQuadBytes, e = i % kQuadBytes;
  const uint8_t byte = quad_byte(sb + lay.qs + c * 8 * kVector, q, l, 2 * half + e % 2);
  return e >= 2 ? byte >> 4 : byte & 0x0f;
}
int q5_k_level(const uint8_t* sb, const KQuantPackedLayout& lay, int l, int i) {
  const int c = i / 64, half = (i % 64) / 32, q = (i % 32) / kQuadBytes, e = i % kQuadBytes;
  const uint8_t bits = quad_byte(sb + lay.qh, q, l, 2 * half + e % 2);
  return q4_k_level(sb, lay, l, i) | (((bits >> (2 * c + (e >= 2))) & 1) << 4);
}
int q6_k_level(const uint8_t* sb, const KQuantPackedLayout& lay, int l, int i) {
  const int h = i / 128, quarter = (i % 128) / 32, e = i % 32;
  const uint8_t low = quad_byte(sb + lay.qs + (2 * h + quarter % 2) * 8 * kVector, e / kQuadBytes, l, e % kQuadBytes);
  const uint8_t high = quad_byte(sb + lay.qh + h * 8 * kVector, e / kQuadBytes, l, e % kQuadBytes);
  return ((quarter < 2 ? low & 0x0f : low >> 4) | (((high >> (2 * quarter)) & 3) << 4)) - 32;
}

float factor(const uint8_t* sb, size_t offset, int l) {
  return fp16_to_f32(reinterpret_cast<const uint16_t*>(sb + offset)[l]);
}

float hsum8(const float (&acc)[8]) {
  float t4[4];
  for (int l = 0; l < 4; ++l) t4[l] = acc[4 + l] + acc[l];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

int32_t sub_block_sum(const BlockQ8_K& x, int s) { return int32_t{x.bsums[2 * s]} + int32_t{x.bsums[2 * s + 1]}; }

// dot_q4_k_q8_k_ref (kScalarMins false) and dot_q5_k_q8_k_ref (true) on lane l of a packed group.
template <int (*Level)(const uint8_t*, const KQuantPackedLayout&, int, int), bool kScalarMins>
float k4_output(const uint8_t* group, const KQuantPackedLayout& lay, int64_t nsb, int l, const BlockQ8_K* x) {
  float acc[8] = {}, acc_m[4] = {}, summs = 0.0f;
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* sb = group + b * lay.super_block_bytes;
    const float d = x[b].d * factor(sb, lay.d, l);
    const float dmin = -x[b].d * factor(sb, lay.dmin, l);
    int32_t mins[4];
    for (int k = 0; k < 4; ++k) {
      const uint8_t* pair = sb + lay.mins + k * 2 * kPackRows + 2 * l;  // mins of sub-blocks 2k, 2k + 1
      mins[k] = pair[0] * sub_block_sum(x[b], 2 * k) + pair[1] * sub_block_sum(x[b], 2 * k + 1);
    }
    if (kScalarMins) {
      summs = std::fma(dmin, static_cast<float>((mins[0] + mins[1]) + (mins[2] + mins[3])), summs);
    } else {
      for (int k = 0; k < 4; ++k) acc_m[k] = std::fma(dmin, static_cast<float>(mins[k]), acc_m[k]);
    }
    int32_t lanes[8] = {};
    for (int s = 0; s < 8; ++s) {
      const int32_t scale = sb[lay.scales + (s / 2) * 2 * kPackRows + 2 * l + s % 2];
      for (int q = 0; q < 8; ++q) {
        int32_t quad = 0;
        for (int e = 0; e < kQuadBytes; ++e) {
          const int i = 32 * s + kQuadBytes * q + e;  // the activations are permuted (packed_k_quant.h)
          quad += Level(sb, lay, l, i) * int32_t{x[b].qs[k4_activation_position(i)]};
        }
        lanes[q] += scale * quad;
      }
    }
    for (int q = 0; q < 8; ++q) acc[q] = std::fma(d, static_cast<float>(lanes[q]), acc[q]);
  }
  return hsum8(acc) + (kScalarMins ? summs : (acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
}

// dot_q6_k_q8_k_ref on lane l: in 32-element chunk c, lanes 0-3 carry sub-block 2c, lanes 4-7 2c + 1.
float q6_k_output(const uint8_t* group, const KQuantPackedLayout& lay, int64_t nsb, int l, const BlockQ8_K* x) {
  float acc[8] = {};
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* sb = group + b * lay.super_block_bytes;
    const float d = x[b].d * factor(sb, lay.d, l);
    int32_t lanes[8] = {};
    for (int s = 0; s < 16; ++s) {
      const int32_t scale = static_cast<int8_t>(sb[lay.scales + s * kPackRows + l]);
      for (int q = 4 * (s % 2); q < 4 * (s % 2) + 4; ++q) {
        int32_t quad = 0;
        for (int e = 0; e < kQuadBytes; ++e) {
          const int i = 32 * (s / 2) + kQuadBytes * q + e;
          quad += q6_k_level(sb, lay, l, i) * int32_t{x[b].qs[i]};
        }
        lanes[q] += scale * quad;
      }
    }
    for (int q = 0; q < 8; ++q) acc[q] = std::fma(d, static_cast<float>(lanes[q]), acc[q]);
  }
  return hsum8(acc);
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
        if constexpr (T == WeightType::Q4_K) out = k4_output<q4_k_level, false>(group, lay, nsb, l, xr);
        else if constexpr (T == WeightType::Q5_K) out = k4_output<q5_k_level, true>(group, lay, nsb, l, xr);
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
