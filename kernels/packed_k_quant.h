// Q4_K, Q5_K and Q6_K weight matrices repacked at load for a register-blocked GEMM against Q8_K activation
// rows: 16 weight rows interleaved four bytes at a time (as packed_gemm.h does for Q8_0/Q4_0), so one
// loaded vector serves several activation rows and one broadcast activation quad serves 16 weight rows.
// The results are bitwise those of the row-by-row K-quant dots (ref/dot_k_quant_ref.cpp): per super-block
// the same exact integer, fused into the one float accumulator in the same order.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/packed_gemm.h"

namespace glacier::kernels {

bool packable_k_quant(WeightType t);  // Q4_K, Q5_K, Q6_K

// Layout of one group (rows 16g .. 16g+15; rows past the matrix are zero with d = dmin = 0), one
// super-block after another, each a multiple of 64 bytes. A "quad vector" is 64 bytes: for lane l (row
// 16g + l), four consecutive bytes of that row's field. Offsets inside one super-block:
// Q4_K (2368 bytes) and Q5_K (2880):
//   qs     8 sub-blocks s x 4 quad vectors q: byte t of a lane holds element 4q + t of sub-block s in its
//          low nibble and element 16 + 4q + t in its high nibble, so each nibble vector is one quad of
//          one sub-block, against a plain Q8_K activation quad
//   qh     Q5_K only, 2 halves h x 4 quad vectors q: bit s of byte t is the fifth bit of element
//          16h + 4q + t of sub-block s
//   scales 8 sub-blocks x 16 rows, a byte each (the 6-bit scales)
//   mins   4 pairs k x 16 rows x 2 bytes: the mins of sub-blocks 2k and 2k + 1
//   d      16 fp16, then dmin 16 fp16
// Q6_K (3392 bytes):
//   qs     2 halves h x 3 planes j x 8 quad vectors q: with u_k the stored level + 32 (0..63) of element
//          128h + 32k + 4q + t, byte t of a lane holds u_j in its low 6 bits and bits 2j, 2j + 1 of u_3 in
//          its top 2, so u_0..u_2 take one AND and u_3 eight operations (17 for the four from GGUF's
//          nibble and 2-bit planes); chunks 0..2 each read one plane front to back
//   scales 16 sub-blocks x 16 rows, int8
//   d      16 fp16, then 32 bytes of padding
struct KQuantPackedLayout {
  size_t qs, qh, scales, mins, d, dmin, super_block_bytes;
};
constexpr int kKQuantQuadBytes = 4;                              // a row's bytes in one quad vector
constexpr int kKQuantQuadVector = kPackRows * kKQuantQuadBytes;  // one quad vector: a quad of each of the 16 rows

// The layout of T (Q4_K, Q5_K or Q6_K) as a constant, which the kernels fold into their addresses.
template <WeightType T>
constexpr KQuantPackedLayout kKQuantPackedLayout = [] {
  static_assert(T == WeightType::Q4_K || T == WeightType::Q5_K || T == WeightType::Q6_K);
  constexpr size_t kChunk = 8 * kKQuantQuadVector;  // the quad vectors of 32 bytes of each row
  constexpr size_t kFactors = kPackRows * sizeof(uint16_t);
  if constexpr (T == WeightType::Q6_K) {
    constexpr size_t scales = 2 * 3 * kChunk, d = scales + 16 * kPackRows;
    return KQuantPackedLayout{0, 0, scales, 0, d, 0, d + 2 * kFactors};  // 32 bytes pad to a multiple of 64
  } else {
    constexpr size_t qh = 4 * kChunk, scales = qh + (T == WeightType::Q5_K ? kChunk : 0);
    constexpr size_t mins = scales + 8 * kPackRows, d = mins + 8 * kPackRows;
    return KQuantPackedLayout{0, qh, scales, mins, d, d + kFactors, d + 2 * kFactors};
  }
}();
KQuantPackedLayout k_quant_packed_layout(WeightType t);  // the same, for a type known at run time
size_t k_quant_packed_group_bytes(WeightType t, int64_t cols);

constexpr int kK4QuadsPerSubBlock = 4;  // quad vectors of nibbles per 32-element sub-block
// Batches of at least this many activation rows have each tile of weight rows unpack its levels once, a
// few super-blocks at a time, for all of its row tiles (the SIMD variants; same results, other code path).
constexpr int64_t kPackedKQuantExpandFromRows = 16;

// Writes groups [g_begin, g_end) of m's packed form into dst (kPackAlign-aligned, packed_bytes(m) long).
void pack_k_quant_groups(const Matrix& m, uint8_t* dst, int64_t g_begin, int64_t g_end);

// The packed GEMM of a variant: y[r * ldy + o] for groups [g_begin, g_end) against n_rows BlockQ8_K rows
// (x_row_bytes apart), each output bitwise the row-by-row dot of DotKernels::q*_k_q8_k.
PackedGemmFn packed_k_quant_gemm(Isa isa, WeightType t);

// The scalar twins and the SIMD variants (avx2 without and with AVX-VNNI; avx512 with VNNI, which the
// avx512 and avx512-nobf16 tiers share, and without).
#define GLACIER_PACKED_K_QUANT_VARIANTS(type)                                                         \
  GLACIER_PACKED_GEMM(packed_gemm_##type##_ref);                                                      \
  GLACIER_PACKED_GEMM(packed_gemm_##type##_avx2);                                                     \
  GLACIER_PACKED_GEMM(packed_gemm_##type##_avx2_vnni);                                                \
  GLACIER_PACKED_GEMM(packed_gemm_##type##_avx512);                                                   \
  GLACIER_PACKED_GEMM(packed_gemm_##type##_avx512_novnni);
GLACIER_PACKED_K_QUANT_VARIANTS(q4_k)
GLACIER_PACKED_K_QUANT_VARIANTS(q5_k)
GLACIER_PACKED_K_QUANT_VARIANTS(q6_k)
#undef GLACIER_PACKED_K_QUANT_VARIANTS

}  // namespace glacier::kernels
