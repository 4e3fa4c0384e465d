// The F16 and BF16 kernels of f16_gemm_avx2.cpp and f16_gemm_avx512.cpp (each built once), which the
// tier tables of dot_avx2.cpp and dot_avx512.cpp list: dot, row tile (DotTileFn) and GEMM (RowGemmFn)
// of one summation order per source, so the three agree bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/dispatch.h"

namespace glacier::kernels {

// f32 -> f16 rows by vcvtps2ph, round to nearest even: bitwise f32_to_fp16 (DotKernels::f32_to_f16_row).
void f32_to_f16_row_avx2(const float* x, uint16_t* y, int64_t n);
void f32_to_f16_row_avx512(const float* x, uint16_t* y, int64_t n);
// f32 -> f16 -> f32 rows (vcvtps2ph, then the exact vcvtph2ps): bitwise DotKernels::round_to_f16_row.
void round_to_f16_row_avx2(const float* x, float* y, int64_t n);
void round_to_f16_row_avx512(const float* x, float* y, int64_t n);

// One summation order's dot, row tile and GEMM: float_gemm.h's three entry points for one Ops
// (float_gemm::kernels), so they agree bit for bit.
struct FloatDotKernels {
  float (*dot)(const uint16_t* w, const uint16_t* x, int64_t n);
  DotTileFn tile;
  RowGemmFn gemm;
};

extern const FloatDotKernels f16_kernels_avx2;
extern const FloatDotKernels bf16_kernels_avx2;
extern const FloatDotKernels f16_kernels_avx512;
// BF16 widened to float and summed by fma (the AVX-512 tiers without AVX512-BF16).
extern const FloatDotKernels bf16_widen_kernels_avx512;

}  // namespace glacier::kernels
