// AVX-512 (F/BW/DQ/VL) variants of the dot kernels and Q8_0 row quantization, built once per tier
// (isa_tier.h): int8 blocks go two to a zmm through dpbusd (unsigned x signed bytes; VNNI's instruction or
// its exact emulation); bf16 uses dpbf16ps where the tier has BF16, which treats subnormal bf16 inputs and
// results as zero (covered by the tests' absolute tolerance), and fma on widened floats where not.
// K-quants reuse the 256-bit code of k_quant_avx2.h: ggml's order is defined on 8 lanes anyway.
#include <immintrin.h>

#include <cmath>

#include "kernels/x86/gcc_undefined_vector_warning.h"

#include "kernels/f32_dot_order.h"
#include "kernels/x86/dot_tile.h"
#include "kernels/x86/f16_kernels.h"
#include "kernels/x86/float_gemm.h"
#include "kernels/x86/isa_tier.h"
#include "kernels/x86/k_quant_avx2.h"
#include "kernels/x86/lanes_256.h"
#include "kernels/x86/legacy_quant.h"

#if GLACIER_X86_BF16 && !GLACIER_X86_VNNI
#error "no AVX-512 tier has BF16 without VNNI"
#endif

namespace glacier::kernels {

namespace {

using x86::dpbusd;

#if GLACIER_X86_BF16
// bf16 pairs by dpbf16ps (float_gemm.h's order): one 16-lane accumulator per output over 32 elements a
// step, activations read as prepared (bf16), 5 weight rows x 4 activation rows a tile.
struct Bf16PairOps {
  using W = uint16_t;
  using X = uint16_t;
  using XB = uint16_t;
  using Acc = __m512;
  using WV = __m512bh;
  using XV = __m512bh;
  static constexpr int kStep = 32;
  static constexpr int kGroup = 5;
  static constexpr int kRows = 4;
  static constexpr int kDecodeGroup = 8;
  static constexpr bool kWidenX = false;
  static __m512bh load(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
  static __m512bh load_tail(const uint16_t* p, int left) {
    return (__m512bh)_mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t(1) << left) - 1), p);
  }
  static __m512 zero() { return _mm512_setzero_ps(); }
  static __m512bh load_w(const uint16_t* p) { return load(p); }
  static __m512bh load_w_tail(const uint16_t* p, int left) { return load_tail(p, left); }
  static __m512bh load_x(const uint16_t* p) { return load(p); }
  static __m512bh load_x_tail(const uint16_t* p, int left) { return load_tail(p, left); }
  static __m512 madd(__m512 acc, __m512bh w, __m512bh x) { return _mm512_dpbf16_ps(acc, w, x); }
  static float hsum(__m512 acc) { return _mm512_reduce_add_ps(acc); }
};

constexpr FloatDotKernels bf16_kernels = x86::float_gemm::kernels<Bf16PairOps>();
#else
// Without BF16: each bf16 widened exactly to float and summed by fma (f16_gemm_avx512.cpp).
const FloatDotKernels& bf16_kernels = bf16_widen_kernels_avx512;
#endif

inline __m512i join(__m256i low, __m256i high) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
}
inline __m256i q8_bytes(const BlockQ8_0& b) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
}

// Q8_0 weights: dpbusd(|w|, x with w's sign). Exact while x stays in [-127, 127] (quantize_row_q8_0's
// range), also emulated: |w| <= 128, so a pair sum is at most 2 * 128 * 127.
struct Q8Weights {
  using Block = BlockQ8_0;
  static __m512i bytes(const Block& b) { return _mm512_zextsi256_si512(q8_bytes(b)); }
  static __m512i bytes(const Block& a, const Block& b) { return join(q8_bytes(a), q8_bytes(b)); }
  static __m512i products(__m512i wq, __m512i xq) {
    const __mmask64 negative = _mm512_movepi8_mask(wq);
    const __m512i signed_x = _mm512_mask_sub_epi8(xq, negative, _mm512_setzero_si512(), xq);
    return dpbusd(_mm512_setzero_si512(), _mm512_abs_epi8(wq), signed_x);
  }
};

// Q4_0 weights as unsigned nibbles u: dot(u - 8, x) = dpbusd(u, x) - dpbusd(8, x) (u <= 15: no pair
// sum near the int16 limit).
struct Q4Weights {
  using Block = BlockQ4_0;
  static __m512i bytes(const Block& b) { return _mm512_zextsi256_si512(nibbles(b.qs)); }
  static __m512i bytes(const Block& a, const Block& b) { return join(nibbles(a.qs), nibbles(b.qs)); }
  static __m512i products(__m512i wq, __m512i xq) {
    const __m512i zero = _mm512_setzero_si512();
    return _mm512_sub_epi32(dpbusd(zero, wq, xq), dpbusd(zero, _mm512_set1_epi8(8), xq));
  }
};

// Products of two blocks a zmm (low half block b, high half block b + 1), then fused into one 8-lane
// accumulator block by block: ggml's lane order (see dot_ref.cpp), so every variant agrees bitwise.
template <class Weights>
struct BlockDot {
  using W = typename Weights::Block;
  using X = BlockQ8_0;
  template <int R>
  static void rows(const W* w, const X* const* x, int64_t n, float* out) {
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    const int64_t nb = n / kQK8_0;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
      const __m512i wq = Weights::bytes(w[b], w[b + 1]);
      const float d0 = _cvtsh_ss(w[b].d), d1 = _cvtsh_ss(w[b + 1].d);
      for (int r = 0; r < R; ++r) {
        const __m512i xq = join(q8_bytes(x[r][b]), q8_bytes(x[r][b + 1]));
        const __m512 p = _mm512_cvtepi32_ps(Weights::products(wq, xq));
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d0 * _cvtsh_ss(x[r][b].d)), _mm512_castps512_ps256(p), acc[r]);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d1 * _cvtsh_ss(x[r][b + 1].d)), _mm512_extractf32x8_ps(p, 1), acc[r]);
      }
    }
    if (b < nb) {
      const __m512i wq = Weights::bytes(w[b]);
      const float d0 = _cvtsh_ss(w[b].d);
      for (int r = 0; r < R; ++r) {
        const __m512 p = _mm512_cvtepi32_ps(Weights::products(wq, _mm512_zextsi256_si512(q8_bytes(x[r][b]))));
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d0 * _cvtsh_ss(x[r][b].d)), _mm512_castps512_ps256(p), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]);
  }
};

// Block-sum order (Matrix::block_sum_order): the block's exact integer sum fused once.
template <class Weights>
struct BlockSumDot {
  using W = typename Weights::Block;
  using X = BlockQ8_0;
  template <int R>
  static void rows(const W* w, const X* const* x, int64_t n, float* out) {
    float acc[R] = {};
    for (int64_t b = 0; b < n / kQK8_0; ++b) {
      const __m512i wq = Weights::bytes(w[b]);
      const float dw = _cvtsh_ss(w[b].d);
      for (int r = 0; r < R; ++r) {
        const __m512i p = Weights::products(wq, _mm512_zextsi256_si512(q8_bytes(x[r][b])));
        acc[r] = std::fma(static_cast<float>(_mm512_reduce_add_epi32(p)), dw * _cvtsh_ss(x[r][b].d), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) out[r] = acc[r];
  }
};

// f32 in ggml's summation order (f32_dot_order.h), natively: four 16-lane FMA accumulators.
struct F32GgmlDot {
  using W = float;
  using X = float;
  template <int R>
  static void rows(const float* w, const float* const* x, int64_t n, float* out) {
    const int64_t np = n - n % kF32DotStep;
    __m512 acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
    for (int64_t i = 0; i < np; i += kF32DotStep)
      for (int j = 0; j < 4; ++j) {
        const __m512 wv = _mm512_loadu_ps(w + i + 16 * j);
        for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x[r] + i + 16 * j), acc[r][j]);
      }
    for (int r = 0; r < R; ++r) {
      float lanes[16];
      _mm512_storeu_ps(lanes, _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][2]), _mm512_add_ps(acc[r][1], acc[r][3])));
      out[r] = finish_f32_dot(np ? reduce_f32_lanes(lanes) : 0.0f, w, x[r], np, n);
    }
  }
};

using DotF32 = F32GgmlDot;
using DotQ8 = BlockDot<Q8Weights>;
using DotQ4 = BlockDot<Q4Weights>;

inline __m512i round_even(__m512 v) {
  return _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

void quantize_row_q8_0_avx512(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = q8_multiplier(amax);
    y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    const __m512 scale = _mm512_set1_ps(id);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs),
                     _mm512_cvtsepi32_epi8(round_even(_mm512_mul_ps(v0, scale))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16),
                     _mm512_cvtsepi32_epi8(round_even(_mm512_mul_ps(v1, scale))));
  }
}

}  // namespace

// The table of this build's tier (dispatch.h).
#if GLACIER_X86_BF16
const DotKernels& avx512_kernels() {
#elif GLACIER_X86_VNNI
const DotKernels& avx512_nobf16_kernels() {
#else
const DotKernels& avx512_novnni_kernels() {
#endif
  static const DotKernels table{
      .f32_f32 = simd::dot_single<DotF32>,
      .f16_f16 = f16_kernels_avx512.dot,
      .bf16_bf16 = bf16_kernels.dot,
      .q8_0_q8_0 = simd::dot_single<DotQ8>,
      .q4_0_q8_0 = simd::dot_single<DotQ4>,
      .quantize_row_q8_0 = quantize_row_q8_0_avx512,
      .q4_0_q8_0_block_sums = simd::dot_single<BlockSumDot<Q4Weights>>,
      .q8_0_q8_0_block_sums = simd::dot_single<BlockSumDot<Q8Weights>>,
      .f32_f32_tile = simd::dot_tile<DotF32>,
      .f16_f16_tile = f16_kernels_avx512.tile,
      .bf16_bf16_tile = bf16_kernels.tile,
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
      .q8_0_packed_gemm = GLACIER_AVX512_TIER_NAME(packed_gemm_q8_0_avx512),
      .q8_0_packed_block_sums_gemm = GLACIER_AVX512_TIER_NAME(packed_gemm_q8_0_block_sums_avx512),
      .q4_0_packed_gemm = GLACIER_AVX512_TIER_NAME(packed_gemm_q4_0_avx512),
      .q4_0_packed_block_sums_gemm = GLACIER_AVX512_TIER_NAME(packed_gemm_q4_0_block_sums_avx512),
      .attend = attend_avx512,
      .swiglu = swiglu_avx512,
      .sum_exp = sum_exp_avx512,
      .f16_gemm = f16_kernels_avx512.gemm,
      .q4_1_q8_1 = GLACIER_AVX512_TIER_NAME(dot_q4_1_q8_1_avx512),
      .q5_0_q8_0 = GLACIER_AVX512_TIER_NAME(dot_q5_0_q8_0_avx512),
      .q5_1_q8_1 = GLACIER_AVX512_TIER_NAME(dot_q5_1_q8_1_avx512),
      .iq4_nl_q8_0 = GLACIER_AVX512_TIER_NAME(dot_iq4_nl_q8_0_avx512),
      .quantize_row_q8_1 = GLACIER_AVX512_TIER_NAME(quantize_row_q8_1_avx512),
      .q4_1_q8_1_tile = GLACIER_AVX512_TIER_NAME(dot_q4_1_q8_1_tile_avx512),
      .q5_0_q8_0_tile = GLACIER_AVX512_TIER_NAME(dot_q5_0_q8_0_tile_avx512),
      .q5_1_q8_1_tile = GLACIER_AVX512_TIER_NAME(dot_q5_1_q8_1_tile_avx512),
      .iq4_nl_q8_0_tile = GLACIER_AVX512_TIER_NAME(dot_iq4_nl_q8_0_tile_avx512),
      .iq4_xs_q8_k = simd::dot_single<kquant::IQ4XSDot>,
      .iq4_xs_q8_k_tile = simd::dot_tile<kquant::IQ4XSDot>,
      .q2_k_q8_k = simd::dot_single<kquant::Q2KDot>,
      .q3_k_q8_k = simd::dot_single<kquant::Q3KDot>,
      .q2_k_q8_k_tile = simd::dot_tile<kquant::Q2KDot>,
      .q3_k_q8_k_tile = simd::dot_tile<kquant::Q3KDot>,
      .bf16_gemm = bf16_kernels.gemm,
      .f32_to_f16_row = f32_to_f16_row_avx512,
      .round_to_f16_row = round_to_f16_row_avx512,
  };
  return table;
}

}  // namespace glacier::kernels
