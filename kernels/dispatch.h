// Instruction-set variants of the kernels and the choice among them: picked once at start-up from
// cpuid, overridable by GLACIER_KERNELS=<isa_name> (tests compare every variant with ref).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kernels/packed_gemm.h"
#include "kernels/quant_blocks.h"

namespace glacier::kernels {

// x86 tiers by CPU feature, in order of preference (the best supported one is the default):
//   avx2           AVX2, FMA, F16C (Haswell, Zen 1 and later)
//   avx2-vnni      + AVX-VNNI (Alder Lake; Zen 5 and Sapphire Rapids run avx512 instead)
//   avx512-novnni  + AVX-512 F/BW/DQ/VL (Skylake-SP)
//   avx512-nobf16  + AVX512-VNNI (Cascade Lake, Ice Lake)
//   avx512         + AVX512-BF16 (Cooper Lake, Sapphire Rapids, Zen 4 and 5): what avx512 always meant
enum class Isa { Ref, Avx2, Avx2Vnni, Avx512NoVnni, Avx512NoBf16, Avx512 };
const char* isa_name(Isa isa);

// Most activation rows one tile call handles (matmul walks the batch in tiles of this many rows).
constexpr int kMaxTileRows = 4;

// One weight row against nx <= kMaxTileRows activation rows (x + i * x_stride bytes); writes
// out[i * out_stride]. Each out[i] must be bitwise equal to the single-row dot of row i, so a
// tile is only a way to read the weight row once, never a different reduction order.
using DotTileFn = void (*)(const void* w, const void* x, size_t x_stride, int nx, int64_t n,
                           float* out, int64_t out_stride);

// Weight rows [o_begin, o_end) (w_row_bytes apart, n elements each) against n_rows prepared activation
// rows: y[r * ldy + o], each bitwise the variant's single-row dot. A register-tiled alternative to the
// tile loop of matmul.cpp where a variant has one.
using RowGemmFn = void (*)(const uint8_t* w, size_t w_row_bytes, int64_t o_begin, int64_t o_end, int64_t n,
                           const uint8_t* x, size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy);

// The dot products of one variant. n counts elements (a multiple of 32 for the block types).
// Tables fill it with designated initialisers (.field = kernel) so each entry names its field;
// tests/kernels/kernel_tables_test.cpp lists every field and fails on a null one.
struct DotKernels {
  float (*f32_f32)(const float* w, const float* x, int64_t n);
  float (*f16_f16)(const uint16_t* w, const uint16_t* x, int64_t n);
  float (*bf16_bf16)(const uint16_t* w, const uint16_t* x, int64_t n);
  float (*q8_0_q8_0)(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n);
  float (*q4_0_q8_0)(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n);
  void (*quantize_row_q8_0)(const float* x, BlockQ8_0* y, int64_t n);
  // Block-sum order: each block's full integer sum fused once into one float accumulator (for Q4_0
  // the order of llama.cpp's repacked x86 kernel; see Matrix::block_sum_order).
  float (*q4_0_q8_0_block_sums)(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n);
  float (*q8_0_q8_0_block_sums)(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n);
  // Tiled twins of the dots above (same element types, same results bit for bit).
  DotTileFn f32_f32_tile;
  DotTileFn f16_f16_tile;
  DotTileFn bf16_bf16_tile;
  DotTileFn q8_0_q8_0_tile;
  DotTileFn q4_0_q8_0_tile;
  DotTileFn q4_0_q8_0_block_sums_tile;
  DotTileFn q8_0_q8_0_block_sums_tile;
  // K-quant weights against Q8_K activations (n a multiple of 256): per super-block one exact integer
  // fused into one float accumulator, then the mins' (ref/dot_k_quant_ref.cpp).
  float (*q4_k_q8_k)(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n);
  float (*q5_k_q8_k)(const BlockQ5_K* w, const BlockQ8_K* x, int64_t n);
  float (*q6_k_q8_k)(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n);
  void (*quantize_row_q8_k)(const float* x, BlockQ8_K* y, int64_t n);
  DotTileFn q4_k_q8_k_tile;
  DotTileFn q5_k_q8_k_tile;
  DotTileFn q6_k_q8_k_tile;
  // Packed Q8_0/Q4_0 weights (packed_gemm.h) against packed activation rows, in lane and in block-sum
  // order (Matrix::block_sum_order).
  PackedGemmFn q8_0_packed_gemm;
  PackedGemmFn q8_0_packed_block_sums_gemm;
  PackedGemmFn q4_0_packed_gemm;
  PackedGemmFn q4_0_packed_block_sums_gemm;
  // Attention over the tiled KV cache and the SwiGLU activation (attention.h).
  AttendFn attend;
  SwigluFn swiglu;
  SumExpFn sum_exp;
  // F16 weights against f16 activations, tiled over weight rows too (null: the tile loop of matmul.cpp).
  RowGemmFn f16_gemm;
  // 32-element block types beyond Q4_0, in ggml-cpu's x86 lane order (ref/dot_legacy_quant_ref.cpp):
  // Q4_1/Q5_1 against Q8_1 activations (their min term rides on Q8_1's block sum), Q5_0/IQ4_NL against Q8_0.
  float (*q4_1_q8_1)(const BlockQ4_1* w, const BlockQ8_1* x, int64_t n);
  float (*q5_0_q8_0)(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n);
  float (*q5_1_q8_1)(const BlockQ5_1* w, const BlockQ8_1* x, int64_t n);
  float (*iq4_nl_q8_0)(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n);
  void (*quantize_row_q8_1)(const float* x, BlockQ8_1* y, int64_t n);
  DotTileFn q4_1_q8_1_tile;
  DotTileFn q5_0_q8_0_tile;
  DotTileFn q5_1_q8_1_tile;
  DotTileFn iq4_nl_q8_0_tile;
  // IQ4_XS against Q8_K, in ggml-cpu's x86 order (ref/dot_k_quant_ref.cpp).
  float (*iq4_xs_q8_k)(const BlockIQ4_XS* w, const BlockQ8_K* x, int64_t n);
  DotTileFn iq4_xs_q8_k_tile;
  // Q2_K and Q3_K against Q8_K, in ggml-cpu's x86 order (ref/dot_k_quant_ref.cpp).
  float (*q2_k_q8_k)(const BlockQ2_K* w, const BlockQ8_K* x, int64_t n);
  float (*q3_k_q8_k)(const BlockQ3_K* w, const BlockQ8_K* x, int64_t n);
  DotTileFn q2_k_q8_k_tile;
  DotTileFn q3_k_q8_k_tile;
  // BF16 weights against bf16 activations, tiled over weight rows too (null: the tile loop of matmul.cpp).
  RowGemmFn bf16_gemm;
  // f32 -> f16 activation rows, round to nearest even: bitwise f32_to_fp16 of each element.
  void (*f32_to_f16_row)(const float* x, uint16_t* y, int64_t n);
  // f32 rows rounded to f16 and widened back, the packed F16 GEMM's activations (packed_float.h):
  // bitwise fp16_to_f32(f32_to_fp16(x[i])) of each element.
  void (*round_to_f16_row)(const float* x, float* y, int64_t n);
};

bool cpu_supports(Isa isa);
std::vector<Isa> supported_isas();       // ref first
const DotKernels& kernels_for(Isa isa);  // throws InternalError if not compiled or not supported
Isa active_isa();                        // chosen once (best supported, or GLACIER_KERNELS)
void set_active_isa(Isa isa);            // for tests and benchmarks
const DotKernels& active_kernels();
// The row tile of a weight type in table k (block-sum order for Q8_0/Q4_0 when asked); defined in matmul.cpp.
DotTileFn tile_for(const DotKernels& k, WeightType t, bool block_sum_order);

// The variant a GLACIER_KERNELS value asks for: null or empty means the best supported one.
// Throws InputError naming the value and the supported variants when it is unknown or unsupported.
Isa isa_for_request(const char* request);

// Variant tables, defined in their own translation units.
const DotKernels& ref_kernels();
const DotKernels& avx2_kernels();
const DotKernels& avx2_vnni_kernels();
const DotKernels& avx512_novnni_kernels();
const DotKernels& avx512_nobf16_kernels();
const DotKernels& avx512_kernels();

}  // namespace glacier::kernels
