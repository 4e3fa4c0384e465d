// AVX2 + FMA + F16C variants of the dot kernels and Q8_0 row quantization (K-quants: k_quant_avx2.h, F16 and
// BF16: f16_gemm_avx2.cpp),
// built with and without AVX-VNNI (isa_tier.h). Int8 products are dpbusd of |w| and x carrying w's sign
// (exact, emulated too, while x stays in [-127, 127], which quantize_row_q8_0 guarantees: |w| <= 128);
// each activation row keeps its own accumulators (dot_tile.h).
#include <immintrin.h>

#include <cmath>

#include "kernels/f32_dot_order.h"
#include "kernels/x86/dot_tile.h"
#include "kernels/x86/f16_kernels.h"
#include "kernels/x86/isa_tier.h"
#include "kernels/x86/k_quant_avx2.h"
#include "kernels/x86/lanes_256.h"
#include "kernels/x86/legacy_quant.h"
#include "kernels/x86/q8_block_256.h"

namespace glacier::kernels {

namespace {

// Adds one block's int8 dot (w signed, any value; x in [-127, 127]) scaled by d into acc.
inline __m256 add_block(__m256i wq, const BlockQ8_0& xb, float dw, __m256 acc) {
  const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
  const __m256i quads = x86::dpbusd(_mm256_setzero_si256(), _mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq));
  const __m256 d = _mm256_set1_ps(dw * _cvtsh_ss(xb.d));
  return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(quads), acc);
}

// Signed weight bytes of one block.
struct Q8Weights {
  using Block = BlockQ8_0;
  static __m256i load(const Block& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
};
struct Q4Weights {
  using Block = BlockQ4_0;
  static __m256i load(const Block& b) {
    return _mm256_sub_epi8(nibbles(b.qs), _mm256_set1_epi8(8));
  }
};

// Block-sum order (Matrix::block_sum_order): the block's integer sum, reduced exactly, fused once into
// a scalar accumulator.
template <class Weights>
struct BlockSumDot {
  using W = typename Weights::Block;
  using X = BlockQ8_0;
  template <int R>
  static void rows(const W* w, const X* const* x, int64_t n, float* out) {
    float acc[R] = {};
    for (int64_t b = 0; b < n / kQK8_0; ++b) {
      const __m256i wq = Weights::load(w[b]);
      const float dw = _cvtsh_ss(w[b].d);
      for (int r = 0; r < R; ++r) {
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r][b].qs));
        const __m256i quads = x86::dpbusd(_mm256_setzero_si256(), _mm256_abs_epi8(wq), _mm256_sign_epi8(xq, wq));
        acc[r] = std::fma(static_cast<float>(hsum_epi32(quads)), dw * _cvtsh_ss(x[r][b].d), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) out[r] = acc[r];
  }
};

// Block dot in ggml's lane order (see dot_ref.cpp): one 8-lane accumulator, blocks in sequence.
template <class Weights>
struct BlockDot {
  using W = typename Weights::Block;
  using X = BlockQ8_0;
  template <int R>
  static void rows(const W* w, const X* const* x, int64_t n, float* out) {
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    const int64_t nb = n / kQK8_0;
    for (int64_t b = 0; b < nb; ++b) {
      const __m256i wq = Weights::load(w[b]);
      const float d = _cvtsh_ss(w[b].d);
      for (int r = 0; r < R; ++r) acc[r] = add_block(wq, x[r][b], d, acc[r]);
    }
    for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]);
  }
};

// f32 in ggml's summation order (f32_dot_order.h): each 16-lane accumulator is two 8-lane halves.
struct F32GgmlDot {
  using W = float;
  using X = float;
  template <int R>
  static void rows(const float* w, const float* const* x, int64_t n, float* out) {
    const int64_t np = n - n % kF32DotStep;
    __m256 acc[R][8];  // accumulator j, half h at index 2j + h
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 8; ++k) acc[r][k] = _mm256_setzero_ps();
    for (int64_t i = 0; i < np; i += kF32DotStep)
      for (int k = 0; k < 8; ++k) {
        const __m256 wv = _mm256_loadu_ps(w + i + 8 * k);
        for (int r = 0; r < R; ++r) acc[r][k] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[r] + i + 8 * k), acc[r][k]);
      }
    for (int r = 0; r < R; ++r) {
      const __m256 lo = _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][4]), _mm256_add_ps(acc[r][2], acc[r][6]));
      const __m256 hi = _mm256_add_ps(_mm256_add_ps(acc[r][1], acc[r][5]), _mm256_add_ps(acc[r][3], acc[r][7]));
      const __m256 t8 = _mm256_add_ps(hi, lo);
      const __m128 t4 = _mm_add_ps(_mm256_extractf128_ps(t8, 1), _mm256_castps256_ps128(t8));
      float a[4];
      _mm_storeu_ps(a, t4);
      out[r] = finish_f32_dot(np ? (a[0] + a[2]) + (a[1] + a[3]) : 0.0f, w, x[r], np, n);
    }
  }
};

using DotF32 = F32GgmlDot;
using DotQ8 = BlockDot<Q8Weights>;
using DotQ4 = BlockDot<Q4Weights>;

void quantize_row_q8_0_avx2(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const Q8Block256 q = quantize_q8_block_256(x + b * kQK8_0);
    y[b].d = _cvtss_sh(q.amax / 127.0f, _MM_FROUND_TO_NEAREST_INT);
    store_q8_quants_256(q, y[b].qs);
  }
}

}  // namespace

// The table of this build's tier (dispatch.h).
#if GLACIER_X86_VNNI
const DotKernels& avx2_vnni_kernels() {
#else
const DotKernels& avx2_kernels() {
#endif
  static const DotKernels table{
      .f32_f32 = simd::dot_single<DotF32>,
      .f16_f16 = f16_kernels_avx2.dot,
      .bf16_bf16 = bf16_kernels_avx2.dot,
      .q8_0_q8_0 = simd::dot_single<DotQ8>,
      .q4_0_q8_0 = simd::dot_single<DotQ4>,
      .quantize_row_q8_0 = quantize_row_q8_0_avx2,
      .q4_0_q8_0_block_sums = simd::dot_single<BlockSumDot<Q4Weights>>,
      .q8_0_q8_0_block_sums = simd::dot_single<BlockSumDot<Q8Weights>>,
      .f32_f32_tile = simd::dot_tile<DotF32>,
      .f16_f16_tile = f16_kernels_avx2.tile,
      .bf16_bf16_tile = bf16_kernels_avx2.tile,
      .q8_0_q8_0_tile = simd::dot_tile<DotQ8>,
      .q4_0_q8_0_tile = simd::dot_tile<DotQ4>,
      .q4_0_q8_0_block_sums_tile = simd::dot_tile<BlockSumDot<Q4Weights>>,
      .q8_0_q8_0_block_sums_tile = simd::dot_tile<BlockSumDot<Q8Weights>>,
      .q4_k_q8_k = simd::dot_single<kquant::Q4KDot>,
      .q5_k_q8_k = simd::dot_single<kquant::Q5KDot>,
      .q6_k_q8_k = simd::dot_single<kquant::Q6KDot>,
      .quantize_row_q8_k = kquant::quantize_row_q8_k,
      .q4_k_q8_k_tile = simd::dot_tile<kquant::Q4KDot>,
      .q5_k_q8_k_tile = simd::dot_tile<kquant::Q5KDot>,
      .q6_k_q8_k_tile = simd::dot_tile<kquant::Q6KDot>,
      .q8_0_packed_gemm = GLACIER_AVX2_TIER_NAME(packed_gemm_q8_0_avx2),
      .q8_0_packed_block_sums_gemm = GLACIER_AVX2_TIER_NAME(packed_gemm_q8_0_block_sums_avx2),
      .q4_0_packed_gemm = GLACIER_AVX2_TIER_NAME(packed_gemm_q4_0_avx2),
      .q4_0_packed_block_sums_gemm = GLACIER_AVX2_TIER_NAME(packed_gemm_q4_0_block_sums_avx2),
      .attend = attend_avx2,
      .swiglu = swiglu_avx2,
      .sum_exp = sum_exp_avx2,
      .f16_gemm = f16_kernels_avx2.gemm,
      .q4_1_q8_1 = dot_q4_1_q8_1_avx2,
      .q5_0_q8_0 = dot_q5_0_q8_0_avx2,
      .q5_1_q8_1 = dot_q5_1_q8_1_avx2,
      .iq4_nl_q8_0 = dot_iq4_nl_q8_0_avx2,
      .quantize_row_q8_1 = quantize_row_q8_1_avx2,
      .q4_1_q8_1_tile = dot_q4_1_q8_1_tile_avx2,
      .q5_0_q8_0_tile = dot_q5_0_q8_0_tile_avx2,
      .q5_1_q8_1_tile = dot_q5_1_q8_1_tile_avx2,
      .iq4_nl_q8_0_tile = dot_iq4_nl_q8_0_tile_avx2,
      .iq4_xs_q8_k = simd::dot_single<kquant::IQ4XSDot>,
      .iq4_xs_q8_k_tile = simd::dot_tile<kquant::IQ4XSDot>,
      .q2_k_q8_k = simd::dot_single<kquant::Q2KDot>,
      .q3_k_q8_k = simd::dot_single<kquant::Q3KDot>,
      .q2_k_q8_k_tile = simd::dot_tile<kquant::Q2KDot>,
      .q3_k_q8_k_tile = simd::dot_tile<kquant::Q3KDot>,
      .bf16_gemm = bf16_kernels_avx2.gemm,
      .f32_to_f16_row = f32_to_f16_row_avx2,
      .round_to_f16_row = round_to_f16_row_avx2,
  };
  return table;
}

}  // namespace glacier::kernels
