// The F16 and BF16 kernels of f16_gemm_avx2.cpp and f16_gemm_avx512.cpp (each built once), which the
// tier tables of dot_avx2.cpp and dot_avx512.cpp list: dot, row tile (DotTileFn) and GEMM (RowGemmFn)
// of one summation order per source, so the three agree bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>

namespace glacier::kernels {

// f32 -> f16 rows by vcvtps2ph, round to nearest even: bitwise f32_to_fp16 (DotKernels::f32_to_f16_row).
void f32_to_f16_row_avx2(const float* x, uint16_t* y, int64_t n);
void f32_to_f16_row_avx512(const float* x, uint16_t* y, int64_t n);

float dot_f16_avx2(const uint16_t* w, const uint16_t* x, int64_t n);
void dot_f16_tile_avx2(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out, int64_t out_stride);
void f16_gemm_avx2(const uint8_t* w, size_t w_row_bytes, int64_t o_begin, int64_t o_end, int64_t n, const uint8_t* x,
                   size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy);
float dot_bf16_avx2(const uint16_t* w, const uint16_t* x, int64_t n);
void dot_bf16_tile_avx2(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out,
                        int64_t out_stride);
void bf16_gemm_avx2(const uint8_t* w, size_t w_row_bytes, int64_t o_begin, int64_t o_end, int64_t n, const uint8_t* x,
                    size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy);

float dot_f16_avx512(const uint16_t* w, const uint16_t* x, int64_t n);
void dot_f16_tile_avx512(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out,
                         int64_t out_stride);
void f16_gemm_avx512(const uint8_t* w, size_t w_row_bytes, int64_t o_begin, int64_t o_end, int64_t n, const uint8_t* x,
                     size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy);
// BF16 widened to float and summed by fma (the AVX-512 tiers without AVX512-BF16).
float dot_bf16_widen_avx512(const uint16_t* w, const uint16_t* x, int64_t n);
void dot_bf16_widen_tile_avx512(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out,
                                int64_t out_stride);
void bf16_widen_gemm_avx512(const uint8_t* w, size_t w_row_bytes, int64_t o_begin, int64_t o_end, int64_t n,
                            const uint8_t* x, size_t x_row_bytes, int64_t n_rows, float* y, int64_t ldy);

}  // namespace glacier::kernels
