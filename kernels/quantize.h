// Float -> storage-type row encoders for weights (F16, BF16, Q8_0, Q4_0), used when writing model
// files. Weight rounding follows llama-quantize's reference path, not the activation quantizer.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"

namespace glacier::kernels {

// Bytes that n elements take in type t (n a multiple of the block size for Q8_0/Q4_0).
size_t encoded_bytes(WeightType t, int64_t n);

// Q8_0 weights: per block d = amax / 127 and q = round(x / d) with halves away from zero, computed as
// x * (1 / d) the way ggml's reference quantizer does, so a block is byte-identical to its output.
// n must be a multiple of kQK8_0.
void encode_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);

// Q4_0 weights: per block m = the element of largest magnitude (sign kept, first one on ties),
// d = m / -8 and q = min(15, floor(x * (1 / d) + 8.5)), i.e. round(x / d) + 8 clamped to 0..15, the
// same as ggml's reference. Element j < 16 goes to the low nibble of qs[j], j >= 16 to the high
// nibble of qs[j - 16]. n must be a multiple of kQK4_0.
void encode_row_q4_0(const float* x, BlockQ4_0* y, int64_t n);

void encode_row_f16(const float* x, uint16_t* y, int64_t n);
void encode_row_bf16(const float* x, uint16_t* y, int64_t n);

// Encodes n floats as type t into out (encoded_bytes(t, n) bytes); F32 is a plain copy.
void encode_row(WeightType t, const float* x, void* out, int64_t n);

}  // namespace glacier::kernels
