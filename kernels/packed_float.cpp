// Packing of F16 and BF16 matrices into column-major 16-row groups, the float activation rows they take,
// and the choice of the packed float GEMM per tier (layouts in packed_float.h).
#include "kernels/packed_float.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/quant_blocks.h"
#include "util/error.h"

namespace glacier::kernels {

bool packable_float(WeightType t) { return t == WeightType::F16 || t == WeightType::BF16; }

bool packs_float_weights(Isa isa) { return isa == Isa::Avx2 || isa == Isa::Avx2Vnni; }

size_t float_packed_group_bytes(int64_t cols) {
  const size_t bytes = static_cast<size_t>(cols) * kPackRows * sizeof(uint16_t);
  return (bytes + kPackAlign - 1) / kPackAlign * kPackAlign;
}

void pack_float_groups(const Matrix& m, uint8_t* dst, int64_t g_begin, int64_t g_end) {
  GLACIER_ASSERT(packable_float(m.type) && m.data, "packing an F16 or BF16 matrix with data");
  GLACIER_ASSERT(0 <= g_begin && g_begin <= g_end && g_end <= packed_groups(m.rows), "group range in the matrix");
  const size_t group_bytes = float_packed_group_bytes(m.cols);
  for (int64_t g = g_begin; g < g_end; ++g) {
    uint8_t* out_bytes = dst + static_cast<size_t>(g) * group_bytes;
    std::memset(out_bytes, 0, group_bytes);  // rows past the matrix, and the padding
    auto* out = reinterpret_cast<uint16_t*>(out_bytes);
    const int64_t rows = std::min<int64_t>(kPackRows, m.rows - g * kPackRows);
    for (int64_t l = 0; l < rows; ++l) {
      const auto* row = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(m.data) +
                                                          static_cast<size_t>(g * kPackRows + l) * m.row_bytes);
      for (int64_t k = 0; k < m.cols; ++k) out[k * kPackRows + l] = row[k];
    }
  }
}

size_t float_packed_activation_row_bytes(int64_t cols) { return static_cast<size_t>(cols) * sizeof(float); }

int64_t float_packed_activation_index(int64_t n_rows, int64_t cols, int64_t r, int64_t k) {
  const int64_t r0 = r / kFloatRowBlock * kFloatRowBlock, block_rows = std::min(kFloatRowBlock, n_rows - r0);
  const int64_t k0 = k / kFloatSpan * kFloatSpan, len = std::min(kFloatSpan, cols - k0);
  const FloatRowTiles tiles(block_rows);
  int64_t t = 0;
  while (tiles.first(t) + tiles.rows(t) <= r - r0) ++t;
  return r0 * cols + k0 * block_rows + tiles.first(t) * len + (k - k0) * tiles.rows(t) + (r - r0 - tiles.first(t));
}

void prepare_float_packed_rows(WeightType t, const float* x, int64_t n_rows, int64_t cols, int64_t ldx, float* dst) {
  GLACIER_ASSERT(packable_float(t), std::string("no packed float activations for ") + weight_type_name(t));
  const DotKernels& k = active_kernels();
  float rounded[kFloatSpan];
  for (int64_t r0 = 0; r0 < n_rows; r0 += kFloatRowBlock) {
    const int64_t block_rows = std::min(kFloatRowBlock, n_rows - r0);
    const FloatRowTiles tiles(block_rows);
    for (int64_t k0 = 0; k0 < cols; k0 += kFloatSpan) {
      const int64_t len = std::min(kFloatSpan, cols - k0);
      float* span = dst + r0 * cols + k0 * block_rows;
      for (int64_t tile = 0; tile < tiles.count; ++tile) {
        const int rows = tiles.rows(tile);
        float* out = span + tiles.first(tile) * len;
        for (int r = 0; r < rows; ++r) {
          const float* src = x + (r0 + tiles.first(tile) + r) * ldx + k0;
          if (t == WeightType::F16) {
            k.round_to_f16_row(src, rounded, len);  // bitwise fp16_to_f32(f32_to_fp16(x)) on every tier
          } else {
            for (int64_t c = 0; c < len; ++c) rounded[c] = bf16_to_f32(f32_to_bf16(src[c]));
          }
          for (int64_t c = 0; c < len; ++c) out[c * rows + r] = rounded[c];
        }
      }
    }
  }
}

PackedGemmFn packed_float_gemm(Isa isa, WeightType t) {
  GLACIER_ASSERT(packable_float(t), std::string("no packed float GEMM for ") + weight_type_name(t));
  const bool f16 = t == WeightType::F16;
  // Every x86 tier has AVX2, F16C and FMA: the AVX-512 ones run the AVX2 code on a matrix packed for it.
  if (isa == Isa::Ref) return f16 ? packed_gemm_f16_ref : packed_gemm_bf16_ref;
  return f16 ? packed_gemm_f16_avx2 : packed_gemm_bf16_avx2;
}

}  // namespace glacier::kernels
