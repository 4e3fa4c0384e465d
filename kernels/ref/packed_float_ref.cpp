// Scalar twins of the packed F16/BF16 GEMM (packed_float.h): each output one float sum over k in order,
// fma(w, x, sum) from zero, read from the packed columns and the tiled activations element by element.
// Every packed variant equals them bit for bit.
#include <algorithm>
#include <cmath>

#include "kernels/packed_float.h"
#include "kernels/quant_blocks.h"

namespace glacier::kernels {

namespace {

// Named wrappers: taking the address of the always-inline header helper would emit an out-of-line copy
// that the linker may share with a copy built for a higher tier.
float widen_f16(uint16_t h) { return fp16_to_f32(h); }
float widen_bf16(uint16_t h) { return bf16_to_f32(h); }

template <float (*widen)(uint16_t)>
void packed_float_gemm_ref(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end,
                           const uint8_t* x, size_t /*x_row_bytes*/, int64_t n_rows, float* y, int64_t ldy) {
  const size_t group_bytes = float_packed_group_bytes(cols);
  const auto* xs = reinterpret_cast<const float*>(x);
  for (int64_t g = g_begin; g < g_end; ++g) {
    const auto* column = reinterpret_cast<const uint16_t*>(w + static_cast<size_t>(g) * group_bytes);
    const int64_t lanes = std::min<int64_t>(kPackRows, rows - g * kPackRows);
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t l = 0; l < lanes; ++l) {
        float sum = 0.0f;
        for (int64_t k = 0; k < cols; ++k)
          sum = std::fma(widen(column[k * kPackRows + l]), xs[float_packed_activation_index(n_rows, cols, r, k)], sum);
        y[r * ldy + g * kPackRows + l] = sum;
      }
    }
  }
}

}  // namespace

GLACIER_PACKED_GEMM(packed_gemm_f16_ref) {
  packed_float_gemm_ref<widen_f16>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}
GLACIER_PACKED_GEMM(packed_gemm_bf16_ref) {
  packed_float_gemm_ref<widen_bf16>(w, cols, rows, g_begin, g_end, x, x_row_bytes, n_rows, y, ldy);
}

}  // namespace glacier::kernels
