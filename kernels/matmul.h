// Matrix products of a weight matrix in its GGUF storage type with a batch of f32 activation rows.
// Every output element is reduced in one fixed order that depends on neither the number of rows in
// the batch nor the thread split, so results are batch-invariant (pipelining and micro-batching
// cannot change them).
#pragma once
#include <cstddef>
#include <cstdint>

namespace glacier::kernels {

enum class WeightType { F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K };
const char* weight_type_name(WeightType t);

// A weight matrix: `rows` output features, each a contiguous row of `cols` input features.
struct Matrix {
  WeightType type = WeightType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;  // bytes between consecutive rows
  // Q8_0/Q4_0: reduce in block-sum order (each block's exact integer sum fused once) instead of lane
  // order (one float accumulator per 4-byte quad of the block). The loader sets it from
  // preferred_block_sum_order().
  bool block_sum_order = false;
  // Q8_0/Q4_0/Q4_K/Q5_K/Q6_K (and F16/BF16 on the tiers that pack them): the matrix repacked by pack_groups()
  // (packed_gemm.h), or null. When set, matmul uses the packed GEMM and the output range follows 16-row
  // groups. The quantized ones give bitwise the results of the unpacked kernels; F16/BF16 sum in their own
  // order (packed_float.h).
  const uint8_t* packed = nullptr;
};

// The order the model loader gives a matrix. Q4_0 follows llama.cpp, which on x86 repacks Q4_0 matrices
// whose row count is a multiple of 8 and sums them in block-sum order (keeping the goldens exact: a small
// model's greedy margins are as thin as 3e-4). Q8_0 always takes block sums, unlike llama.cpp's lane
// order: the same exact integers, one float fma a block instead of a convert and an fma per int8 dot
// instruction (the packed GEMM twice as fast). Its logits are 2e-6 from llama.cpp's on the stories260K
// goldens, as far as an independent float64 pass is (reference README): nothing is lost in accuracy.
bool preferred_block_sum_order(WeightType t, int64_t rows);

// Activations converted once per batch into the form the weight type's dot product consumes
// (as ggml-cpu does: Q8_0 rows for Q8_0/Q4_0/Q5_0/IQ4_NL weights, Q8_1 rows for Q4_1/Q5_1, Q8_K rows
// for Q2_K..Q6_K/IQ4_XS, f16 rows for
// F16, bf16 rows for BF16, f32 rows for F32). Storage is caller-provided: see activation_bytes().
struct PreparedActivations {
  WeightType for_type = WeightType::F32;
  bool packed = false;  // rows in the packed-GEMM layout (packed_gemm.h, packed_k_quant.h)
  const void* data = nullptr;
  int64_t n_rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  // The same activations with n rows (rows converted piecewise into one storage).
  PreparedActivations with_rows(int64_t n) const {
    PreparedActivations p = *this;
    p.n_rows = n;
    return p;
  }
};

size_t activation_bytes(WeightType t, int64_t n_rows, int64_t cols);
// Converts x [n_rows x cols] (row stride ldx floats) into `storage` (activation_bytes() large).
PreparedActivations prepare_activations(WeightType t, const float* x, int64_t n_rows, int64_t cols,
                                        int64_t ldx, void* storage);
// The same for a given matrix: the packed layout when w.packed is set (Q8_K rows for K-quants, see packed_k_quant.h;
// rounded floats in register-tile order for F16/BF16, see packed_float.h).
size_t activation_bytes(const Matrix& w, int64_t n_rows);
PreparedActivations prepare_activations(const Matrix& w, const float* x, int64_t n_rows, int64_t ldx, void* storage);
// Rows of a batch may be prepared in pieces (each at its first row's byte offset, activation_bytes(w, 1)
// a row) that start on multiples of this: 1, or packed F16/BF16's row block (their tiles span a block).
int64_t prepared_row_granule(const Matrix& w);
// Output rows that must go to one thread together: 16 for a packed matrix (a group), else 1.
int64_t output_granule(const Matrix& w);

// y[r * ldy + o] = dot(W row o, x row r) for r < x.n_rows and o in [o_begin, o_end).
// Callers split [0, rows) among threads; each thread calls this on its own range.
void matmul(const Matrix& w, const PreparedActivations& x, float* y, int64_t ldy, int64_t o_begin,
            int64_t o_end);

}  // namespace glacier::kernels
