// Scalar reference twins of the 32-element block dots added after Q4_0 (Q4_1, Q5_0, Q5_1, IQ4_NL) and
// of Q8_1 activation quantization: the semantics the SIMD variants must reproduce bit for bit.
#pragma once
#include <cstdint>

#include "kernels/quant_blocks.h"

namespace glacier::kernels {

float dot_q4_1_q8_1_ref(const BlockQ4_1* w, const BlockQ8_1* x, int64_t n);
float dot_q5_0_q8_0_ref(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n);
float dot_q5_1_q8_1_ref(const BlockQ5_1* w, const BlockQ8_1* x, int64_t n);
float dot_iq4_nl_q8_0_ref(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n);
void quantize_row_q8_1_ref(const float* x, BlockQ8_1* y, int64_t n);

}  // namespace glacier::kernels
