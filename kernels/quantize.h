// Float -> storage-type row encoders for weights (F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS,
// Q2_K..Q6_K), used when writing model files. Q8_0/Q4_0 rounding follows llama-quantize's reference path
// exactly; the others produce valid blocks by rules of their own (documented per function).
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

// Q4_1 / Q5_1 weights: per block m = min, d = (max - min) / (2^bits - 1), q = round((x - m) / d)
// clamped to 0..2^bits - 1 (x = d * q + m). No search over scales. (llama.cpp's logits on a
// `llama-quantize --pure` Q4_1/Q5_0/Q5_1 file of the same F32 model equal those on ours to the last
// printed digit, so these rules evidently give its blocks; IQ4_NL's do not: it searches the scale.)
void encode_row_q4_1(const float* x, BlockQ4_1* y, int64_t n);
void encode_row_q5_1(const float* x, BlockQ5_1* y, int64_t n);

// Q5_0 weights: Q4_0's rule with 5 bits: d = m / -16 for m the element of largest magnitude, q =
// round(x / d) + 16 clamped to 0..31.
void encode_row_q5_0(const float* x, BlockQ5_0* y, int64_t n);

// IQ4_NL weights: d = m / -127 (the extreme element lands on the table's -127 level), each element
// takes the nearest table level of x / d, then d is refitted by least squares to the chosen levels
// (and the levels chosen again for the refitted d when that lowers the block's squared error).
void encode_row_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t n);

// IQ4_XS weights: each 32-element sub-block gets its IQ4_NL scale as above; the super-block scale d is
// the largest of them (sign kept) over -32, each sub-block's 6-bit scale round(scale / d) + 32 (clamped
// to 0..63), and the levels are chosen again, nearest for the stored scale. n a multiple of 256.
void encode_row_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t n);

// K-quant weights (n a multiple of 256), by a scale search of their own (not llama-quantize's bytes):
// each sub-block's scale (and, for the min formats Q2_K/Q4_K/Q5_K, its min >= 0) is the least-squares
// refit of the candidate spacing, among a few spread around (range / levels), of least squared error.
// The super-block scale d (and dmin) puts the largest sub-block scale (min) on the top code; the
// sub-block codes are rounded against the stored fp16 d, and the levels chosen again for the stored
// scales. Symmetric formats (Q3_K levels -4..3, Q6_K -32..31) map the sub-block's largest magnitude
// near the extra negative level and the largest sub-block scale on the lowest code (-32, -128).
void encode_row_q2_k(const float* x, BlockQ2_K* y, int64_t n);
void encode_row_q3_k(const float* x, BlockQ3_K* y, int64_t n);
void encode_row_q4_k(const float* x, BlockQ4_K* y, int64_t n);
void encode_row_q5_k(const float* x, BlockQ5_K* y, int64_t n);
void encode_row_q6_k(const float* x, BlockQ6_K* y, int64_t n);

void encode_row_f16(const float* x, uint16_t* y, int64_t n);
void encode_row_bf16(const float* x, uint16_t* y, int64_t n);

// Encodes n floats as type t into out (encoded_bytes(t, n) bytes); F32 is a plain copy.
void encode_row(WeightType t, const float* x, void* out, int64_t n);

}  // namespace glacier::kernels
