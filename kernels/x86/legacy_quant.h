// Entry points of the SIMD variants of the Q4_1/Q5_0/Q5_1/IQ4_NL dots and Q8_1 quantization, defined
// in legacy_quant_avx2.cpp and legacy_quant_avx512.cpp and listed in the DotKernels tables.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/quant_blocks.h"

namespace glacier::kernels {

#define GLACIER_LEGACY_QUANT_ENTRIES(isa)                                                                     \
  float dot_q4_1_q8_1_##isa(const BlockQ4_1* w, const BlockQ8_1* x, int64_t n);                               \
  float dot_q5_0_q8_0_##isa(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n);                               \
  float dot_q5_1_q8_1_##isa(const BlockQ5_1* w, const BlockQ8_1* x, int64_t n);                               \
  float dot_iq4_nl_q8_0_##isa(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n);                           \
  void quantize_row_q8_1_##isa(const float* x, BlockQ8_1* y, int64_t n);                                      \
  void dot_q4_1_q8_1_tile_##isa(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out, \
                                int64_t out_stride);                                                          \
  void dot_q5_0_q8_0_tile_##isa(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out, \
                                int64_t out_stride);                                                          \
  void dot_q5_1_q8_1_tile_##isa(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out, \
                                int64_t out_stride);                                                          \
  void dot_iq4_nl_q8_0_tile_##isa(const void* w, const void* x, size_t x_stride, int nx, int64_t n,           \
                                  float* out, int64_t out_stride);

GLACIER_LEGACY_QUANT_ENTRIES(avx2)
GLACIER_LEGACY_QUANT_ENTRIES(avx512)
GLACIER_LEGACY_QUANT_ENTRIES(avx512_novnni)  // the AVX-512 build without VNNI (isa_tier.h)

#undef GLACIER_LEGACY_QUANT_ENTRIES

}  // namespace glacier::kernels
