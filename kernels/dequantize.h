// Row dequantization (weights in storage type -> f32): used to look up token embeddings, where a
// row is read once per token and speed does not matter.
#pragma once
#include <cstdint>

#include "kernels/matmul.h"

namespace glacier::kernels {

// Writes row `row` of `w` as w.cols floats to `out`.
void dequantize_row(const Matrix& w, int64_t row, float* out);

}  // namespace glacier::kernels
