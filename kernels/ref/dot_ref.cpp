// Scalar reference twins of every dot kernel: the semantics each SIMD variant is tested against.
// Q8_0/Q4_0 follow ggml-cpu's math (per-block float scale times exact integer sum, float accumulator).
// f32 sums in float; f16 and bf16 sum their (exact) products in double, so the reference is the
// accurate side of every comparison.
#include <cmath>

#include "kernels/dispatch.h"
#include "kernels/f32_dot_order.h"
#include "kernels/ref/dot_k_quant_ref.h"
#include "kernels/ref/dot_legacy_quant_ref.h"
#include "kernels/ref/block_dot_order.h"

namespace glacier::kernels {

namespace {

float dot_f32_ref(const float* w, const float* x, int64_t n) { return dot_f32_ggml_order(w, x, n); }

float dot_f16_ref(const uint16_t* w, const uint16_t* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(fp16_to_f32(w[i])) * static_cast<double>(fp16_to_f32(x[i]));
  return static_cast<float>(sum);
}

float dot_bf16_ref(const uint16_t* w, const uint16_t* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(bf16_to_f32(w[i])) * static_cast<double>(bf16_to_f32(x[i]));
  return static_cast<float>(sum);
}

// Block dots in ggml-cpu's x86 order: 8 lanes, lane l holding the exact integer sum of elements
// [4l, 4l + 4) of a block, scaled and fused into a per-lane float accumulator block after block, and
// the lanes summed by the tree of hsum8() at the end. Every SIMD variant computes exactly this, and
// so does llama.cpp on x86 for single rows and batches alike.
using ref::hsum8;

template <class WeightAt>
float block_dot_lanes(int64_t n_blocks, WeightAt weight, const BlockQ8_0* x, const uint16_t* scales, int64_t stride) {
  float acc[8] = {};
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float d = fp16_to_f32(scales[b * stride]) * fp16_to_f32(x[b].d);
    for (int l = 0; l < 8; ++l) {
      int32_t isum = 0;
      for (int k = 4 * l; k < 4 * l + 4; ++k) isum += weight(b, k) * int32_t{x[b].qs[k]};
      acc[l] = std::fma(d, static_cast<float>(isum), acc[l]);
    }
  }
  return hsum8(acc);
}

// Block-sum order: the block's exact integer sum, fused once into one float accumulator.
template <class WeightAt>
float block_dot_sums(int64_t n_blocks, WeightAt weight, const BlockQ8_0* x, const uint16_t* scales, int64_t stride) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t isum = 0;
    for (int k = 0; k < kQK8_0; ++k) isum += weight(b, k) * int32_t{x[b].qs[k]};
    acc = std::fma(static_cast<float>(isum), fp16_to_f32(scales[b * stride]) * fp16_to_f32(x[b].d), acc);
  }
  return acc;
}

float dot_q8_0_ref(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n) {
  auto weight = [w](int64_t b, int k) { return int32_t{w[b].qs[k]}; };  // as stored (signed)
  return block_dot_lanes(n / kQK8_0, weight, x, &w[0].d, sizeof(BlockQ8_0) / sizeof(uint16_t));
}

// Element k of Q4_0 block b: the low nibbles are elements 0..15, the high ones 16..31.
int32_t q4_0_weight(const BlockQ4_0* w, int64_t b, int k) {
  constexpr int kHalf = kQK4_0 / 2;
  const uint8_t byte = w[b].qs[k % kHalf];
  return int32_t{k < kHalf ? (byte & 0x0f) : (byte >> 4)} - 8;
}

float dot_q4_0_ref(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n) {
  auto weight = [w](int64_t b, int k) { return q4_0_weight(w, b, k); };
  return block_dot_lanes(n / kQK4_0, weight, x, &w[0].d, sizeof(BlockQ4_0) / sizeof(uint16_t));
}

float dot_q4_0_block_sums_ref(const BlockQ4_0* w, const BlockQ8_0* x, int64_t n) {
  auto weight = [w](int64_t b, int k) { return q4_0_weight(w, b, k); };
  return block_dot_sums(n / kQK4_0, weight, x, &w[0].d, sizeof(BlockQ4_0) / sizeof(uint16_t));
}

float dot_q8_0_block_sums_ref(const BlockQ8_0* w, const BlockQ8_0* x, int64_t n) {
  auto weight = [w](int64_t b, int k) { return int32_t{w[b].qs[k]}; };
  return block_dot_sums(n / kQK8_0, weight, x, &w[0].d, sizeof(BlockQ8_0) / sizeof(uint16_t));
}

void quantize_row_q8_0_ref(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    const auto [d, id] = ref::q8_block_scale(xb);
    y[b].d = f32_to_fp16(d);
    // nearbyintf in the default rounding mode rounds half to even, as the SIMD conversions do.
    for (int j = 0; j < kQK8_0; ++j) y[b].qs[j] = static_cast<int8_t>(std::nearbyintf(xb[j] * id));
  }
}

// The weight and activation element types of a dot, read off its signature.
template <class DotFn>
struct DotOperands;
template <class W, class X>
struct DotOperands<float (*)(const W*, const X*, int64_t)> {
  using Weight = W;
  using Activation = X;
};

// The reference tile is the definition of "same as the single-row dot": it calls it.
template <auto Dot>
void tile_by_rows(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out,
                  int64_t out_stride) {
  using Operands = DotOperands<decltype(Dot)>;
  const auto* xb = static_cast<const unsigned char*>(x);
  for (int i = 0; i < nx; ++i)
    out[i * out_stride] = Dot(static_cast<const typename Operands::Weight*>(w),
                              reinterpret_cast<const typename Operands::Activation*>(xb + i * x_stride), n);
}

void f32_to_f16_row_ref(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_fp16(x[i]);
}

void round_to_f16_row_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_f32(f32_to_fp16(x[i]));
}

}  // namespace

const DotKernels& ref_kernels() {
  static const DotKernels table{
      .f32_f32 = dot_f32_ref,
      .f16_f16 = dot_f16_ref,
      .bf16_bf16 = dot_bf16_ref,
      .q8_0_q8_0 = dot_q8_0_ref,
      .q4_0_q8_0 = dot_q4_0_ref,
      .quantize_row_q8_0 = quantize_row_q8_0_ref,
      .q4_0_q8_0_block_sums = dot_q4_0_block_sums_ref,
      .q8_0_q8_0_block_sums = dot_q8_0_block_sums_ref,
      .f32_f32_tile = tile_by_rows<dot_f32_ref>,
      .f16_f16_tile = tile_by_rows<dot_f16_ref>,
      .bf16_bf16_tile = tile_by_rows<dot_bf16_ref>,
      .q8_0_q8_0_tile = tile_by_rows<dot_q8_0_ref>,
      .q4_0_q8_0_tile = tile_by_rows<dot_q4_0_ref>,
      .q4_0_q8_0_block_sums_tile = tile_by_rows<dot_q4_0_block_sums_ref>,
      .q8_0_q8_0_block_sums_tile = tile_by_rows<dot_q8_0_block_sums_ref>,
      .q4_k_q8_k = dot_q4_k_q8_k_ref,
      .q5_k_q8_k = dot_q5_k_q8_k_ref,
      .q6_k_q8_k = dot_q6_k_q8_k_ref,
      .quantize_row_q8_k = quantize_row_q8_k_ref,
      .q4_k_q8_k_tile = tile_by_rows<dot_q4_k_q8_k_ref>,
      .q5_k_q8_k_tile = tile_by_rows<dot_q5_k_q8_k_ref>,
      .q6_k_q8_k_tile = tile_by_rows<dot_q6_k_q8_k_ref>,
      .q8_0_packed_gemm = packed_gemm_q8_0_ref,
      .q8_0_packed_block_sums_gemm = packed_gemm_q8_0_block_sums_ref,
      .q4_0_packed_gemm = packed_gemm_q4_0_ref,
      .q4_0_packed_block_sums_gemm = packed_gemm_q4_0_block_sums_ref,
      .attend = attend_ref,
      .swiglu = swiglu_ref,
      .sum_exp = sum_exp_ref,
      .f16_gemm = nullptr,  // the tile loop of matmul.cpp
      .q4_1_q8_1 = dot_q4_1_q8_1_ref,
      .q5_0_q8_0 = dot_q5_0_q8_0_ref,
      .q5_1_q8_1 = dot_q5_1_q8_1_ref,
      .iq4_nl_q8_0 = dot_iq4_nl_q8_0_ref,
      .quantize_row_q8_1 = quantize_row_q8_1_ref,
      .q4_1_q8_1_tile = tile_by_rows<dot_q4_1_q8_1_ref>,
      .q5_0_q8_0_tile = tile_by_rows<dot_q5_0_q8_0_ref>,
      .q5_1_q8_1_tile = tile_by_rows<dot_q5_1_q8_1_ref>,
      .iq4_nl_q8_0_tile = tile_by_rows<dot_iq4_nl_q8_0_ref>,
      .iq4_xs_q8_k = dot_iq4_xs_q8_k_ref,
      .iq4_xs_q8_k_tile = tile_by_rows<dot_iq4_xs_q8_k_ref>,
      .q2_k_q8_k = dot_q2_k_q8_k_ref,
      .q3_k_q8_k = dot_q3_k_q8_k_ref,
      .q2_k_q8_k_tile = tile_by_rows<dot_q2_k_q8_k_ref>,
      .q3_k_q8_k_tile = tile_by_rows<dot_q3_k_q8_k_ref>,
      .bf16_gemm = nullptr,  // the tile loop of matmul.cpp
      .f32_to_f16_row = f32_to_f16_row_ref,
      .round_to_f16_row = round_to_f16_row_ref,
  };
  return table;
}

}  // namespace glacier::kernels
