// Scalar reference twins of the K-quant dots and of Q8_K activation quantization (the semantics the
// SIMD variants must reproduce bit for bit).
#pragma once
#include <cstdint>

#include "kernels/quant_blocks.h"

namespace glacier::kernels {

float dot_q2_k_q8_k_ref(const BlockQ2_K* w, const BlockQ8_K* x, int64_t n);
float dot_q3_k_q8_k_ref(const BlockQ3_K* w, const BlockQ8_K* x, int64_t n);
float dot_q4_k_q8_k_ref(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n);
float dot_q5_k_q8_k_ref(const BlockQ5_K* w, const BlockQ8_K* x, int64_t n);
float dot_iq4_xs_q8_k_ref(const BlockIQ4_XS* w, const BlockQ8_K* x, int64_t n);
float dot_q6_k_q8_k_ref(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n);
void quantize_row_q8_k_ref(const float* x, BlockQ8_K* y, int64_t n);

}  // namespace glacier::kernels
