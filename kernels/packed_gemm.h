// Q8_0 and Q4_0 weight matrices repacked at load for an int8 GEMM: 16 rows interleaved four bytes at
// a time, so one 512-bit VNNI instruction multiplies a quad of one activation row with 16 weight rows.
// Two reduction orders (Matrix::block_sum_order): lane order, eight float accumulators per output, one
// per quad of the block (llama.cpp's x86 Q8_0 and plain Q4_0 order), and block-sum order, each block's
// exact integer sum fused once (llama.cpp's repacked Q4_0 order, and this engine's Q8_0 order).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"

namespace glacier::kernels {

// Rows of a packed group: one 32-bit lane of a zmm per row.
constexpr int kPackRows = 16;
constexpr size_t kPackAlign = 64;

// Layout of one group (rows 16g .. 16g+15; rows past the matrix are zero with scale 0), nb blocks:
//   [nb x quads][nb x 16 fp16 scales], padded to a multiple of 64 bytes.
// Q8_0 quads: 8 x 64 bytes a block; quad q holds, for lane l, bytes 4q..4q+3 of row l's block. Lane
//   order keeps them signed, as in the file: the activations are the unsigned side of dpbusd (x + 128)
//   and the kernel takes 128 * (sum of the weight quad) off, once per weight quad for every activation
//   row. Block-sum order stores w + 128 (unsigned) against signed activations, whose corrections take
//   the 128 off: no weight-side work at all.
// Q4_0 quads: 4 x 64 bytes a block; zmm j holds, for lane l, bytes 4j..4j+3 of row l's packed nibbles:
//   low nibbles are elements 4j..4j+3, high nibbles elements 16+4j..16+4j+3, both as unsigned u (the
//   value is u - 8, taken off through the activation row's corrections).
size_t packed_block_quad_bytes(WeightType t);  // 512 (Q8_0) or 256 (Q4_0)
size_t packed_group_bytes(WeightType t, int64_t cols);
// packable, packed_bytes and pack_groups cover the K-quants (their layout: packed_k_quant.h) and F16/BF16
// (packed_float.h) too.
size_t packed_bytes(const Matrix& m);
bool packable(WeightType t);  // whether the loader packs matrices of type t on the active tier

// Writes m's packed form into dst (packed_bytes(m) bytes, kPackAlign-aligned); rows are split over
// [g_begin, g_end) so several threads can pack one matrix. Returns nothing: set Matrix::packed after.
void pack_groups(const Matrix& m, uint8_t* dst, int64_t g_begin, int64_t g_end);
inline int64_t packed_groups(int64_t rows) { return (rows + kPackRows - 1) / kPackRows; }

// Activations for packed weights, per row (packed_activation_row_bytes apart):
//   [nb x 32 quants][nb x float scale][nb x int32 block correction][nb x 8 int32 quad corrections]
// For lane-order Q8_0 the quants are x + 128 as unsigned bytes and the corrections zero; otherwise the
// quants are signed and correction = -offset * (sum of the block's or the quad's quants), offset 8 for
// Q4_0 and 128 for block-sum Q8_0: dpbusd started from it yields exactly the signed integer sum.
size_t packed_activation_row_bytes(int64_t cols);
// Quantizes x rows (Q8_0, as the unpacked path does) into the packed activation layout for w.
void prepare_packed_row(const Matrix& w, const float* x, uint8_t* dst);

// y[r * ldy + o] for groups [g_begin, g_end) of w (rows 16 g_begin .. min(16 g_end, rows)) and every row
// of the prepared activations. The per-ISA kernels behind it (DotKernels::*_packed_*).
//   lane order:      acc[q] = fma(float(isum of quad q), float(dw) * dx, acc[q]) block after block, then
//                    (acc0 + acc4) ... summed as dot_ref.cpp's hsum8 tree;
//   block-sum order: acc = fma(float(isum of the block), float(dw) * dx, acc).
using PackedGemmFn = void (*)(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end,
                              const uint8_t* x, size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy);

// The scalar definitions (the reference twins every SIMD variant equals bit for bit), and the variants.
#define GLACIER_PACKED_GEMM(name)                                                                       \
  void name(const uint8_t* w, int64_t cols, int64_t rows, int64_t g_begin, int64_t g_end, const uint8_t* x, \
            size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy)
GLACIER_PACKED_GEMM(packed_gemm_q8_0_ref);
GLACIER_PACKED_GEMM(packed_gemm_q8_0_block_sums_ref);
GLACIER_PACKED_GEMM(packed_gemm_q4_0_ref);
GLACIER_PACKED_GEMM(packed_gemm_q4_0_block_sums_ref);
GLACIER_PACKED_GEMM(packed_gemm_q8_0_avx2);
GLACIER_PACKED_GEMM(packed_gemm_q8_0_block_sums_avx2);
GLACIER_PACKED_GEMM(packed_gemm_q4_0_avx2);
GLACIER_PACKED_GEMM(packed_gemm_q4_0_block_sums_avx2);
GLACIER_PACKED_GEMM(packed_gemm_q8_0_avx512);
GLACIER_PACKED_GEMM(packed_gemm_q8_0_block_sums_avx512);
GLACIER_PACKED_GEMM(packed_gemm_q4_0_avx512);
GLACIER_PACKED_GEMM(packed_gemm_q4_0_block_sums_avx512);
// The same sources built for the other tiers (kernels/x86/isa_tier.h): AVX2 with AVX-VNNI, AVX-512 without VNNI.
GLACIER_PACKED_GEMM(packed_gemm_q8_0_avx2_vnni);
GLACIER_PACKED_GEMM(packed_gemm_q8_0_block_sums_avx2_vnni);
GLACIER_PACKED_GEMM(packed_gemm_q4_0_avx2_vnni);
GLACIER_PACKED_GEMM(packed_gemm_q4_0_block_sums_avx2_vnni);
GLACIER_PACKED_GEMM(packed_gemm_q8_0_avx512_novnni);
GLACIER_PACKED_GEMM(packed_gemm_q8_0_block_sums_avx512_novnni);
GLACIER_PACKED_GEMM(packed_gemm_q4_0_avx512_novnni);
GLACIER_PACKED_GEMM(packed_gemm_q4_0_block_sums_avx512_novnni);

// Where the parts of a packed activation row and of a packed group start.
constexpr int kQuadsPerBlock = 8;
struct PackedActivationRow {
  const int8_t* quants;
  const float* scales;
  const int32_t* block_corrections;  // [nb]
  const int32_t* quad_corrections;   // [nb x 8]
};
inline PackedActivationRow packed_activation_row(const uint8_t* row, int64_t cols) {
  const int64_t nb = cols / kQK8_0;
  const uint8_t* scales = row + nb * kQK8_0;
  const uint8_t* block = scales + nb * sizeof(float);
  return {reinterpret_cast<const int8_t*>(row), reinterpret_cast<const float*>(scales),
          reinterpret_cast<const int32_t*>(block), reinterpret_cast<const int32_t*>(block + nb * sizeof(int32_t))};
}
inline const uint16_t* packed_group_scales(WeightType t, const uint8_t* group, int64_t cols) {
  return reinterpret_cast<const uint16_t*>(group + (cols / kQK8_0) * packed_block_quad_bytes(t));
}

}  // namespace glacier::kernels
