// The Q4_1/Q5_0/Q5_1/IQ4_NL dots (ggml's lane order, dot_legacy_quant_ref.cpp) and Q8_1 quantization written
// once over 256-bit vectors, for legacy_quant_avx2.cpp and legacy_quant_avx512.cpp. The including file first
// defines, in its anonymous namespace, the three steps where AVX-512 has better instructions (fifth_bits,
// quads_unsigned, quads_signed_i32) and LEGACY_QUANT_NAME(base), the name of an entry point in its tier.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/x86/dot_tile.h"
#include "kernels/x86/lanes_256.h"
#include "kernels/x86/legacy_quant.h"
#include "kernels/x86/q8_block_256.h"

namespace glacier::kernels {

namespace {

__m256i load_x(const int8_t* qs) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs)); }

struct Q4_1Levels {
  using Block = BlockQ4_1;
  static __m256i load(const Block& b) { return nibbles(b.qs); }
};
struct Q5_1Levels {
  using Block = BlockQ5_1;
  static __m256i load(const Block& b) { return _mm256_or_si256(nibbles(b.qs), fifth_bits(b.qh)); }
};

// Q4_1/Q5_1 against Q8_1: 8-lane accumulator plus the scalar min term.
template <class Levels>
struct MinDot {
  using W = typename Levels::Block;
  using X = BlockQ8_1;
  template <int R>
  static void rows(const W* w, const X* const* x, int64_t n, float* out) {
    __m256 acc[R];
    float summs[R] = {};
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQK8_0; ++b) {
      const __m256i u = Levels::load(w[b]);
      const float dw = _cvtsh_ss(w[b].d), mw = _cvtsh_ss(w[b].m);
      for (int r = 0; r < R; ++r) {
        summs[r] = std::fma(mw, _cvtsh_ss(x[r][b].s), summs[r]);
        const __m256 d = _mm256_set1_ps(dw * _cvtsh_ss(x[r][b].d));
        acc[r] = _mm256_fmadd_ps(d, quads_unsigned(u, load_x(x[r][b].qs)), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]) + summs[r];
  }
};

struct Q5_0Dot {
  using W = BlockQ5_0;
  using X = BlockQ8_0;
  template <int R>
  static void rows(const W* w, const X* const* x, int64_t n, float* out) {
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQK8_0; ++b) {
      const __m256i q = _mm256_sub_epi8(_mm256_or_si256(nibbles(w[b].qs), fifth_bits(w[b].qh)), _mm256_set1_epi8(16));
      const float dw = _cvtsh_ss(w[b].d);
      for (int r = 0; r < R; ++r) {
        const __m256 d = _mm256_set1_ps(dw * _cvtsh_ss(x[r][b].d));
        acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(quads_signed_i32(q, load_x(x[r][b].qs))), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]);
  }
};

__m256i iq4_nl_levels(const BlockIQ4_NL& b) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues));
  const __m256i idx = nibbles(b.qs);
  return _mm256_set_m128i(_mm_shuffle_epi8(table, _mm256_extracti128_si256(idx, 1)),
                          _mm_shuffle_epi8(table, _mm256_castsi256_si128(idx)));
}

// IQ4_NL: even and odd blocks in two accumulators, a last odd block fused as one scalar.
struct IQ4NLDot {
  using W = BlockIQ4_NL;
  using X = BlockQ8_0;
  template <int R>
  static void rows(const W* w, const X* const* x, int64_t n, float* out) {
    const int64_t nb = n / kQK8_0;
    __m256 acc[2][R];
    for (int r = 0; r < R; ++r) acc[0][r] = acc[1][r] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b < nb - nb % 2; ++b) {
      const __m256i q = iq4_nl_levels(w[b]);
      const float dw = _cvtsh_ss(w[b].d);
      for (int r = 0; r < R; ++r) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[r][b].d) * dw);
        acc[b % 2][r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(quads_signed_i32(q, load_x(x[r][b].qs))), acc[b % 2][r]);
      }
    }
    for (int r = 0; r < R; ++r) out[r] = hsum8(_mm256_add_ps(acc[0][r], acc[1][r]));
    if (b < nb) {
      const __m256i q = iq4_nl_levels(w[b]);
      const float dw = _cvtsh_ss(w[b].d);
      for (int r = 0; r < R; ++r) {
        const float isum = static_cast<float>(hsum_epi32(quads_signed_i32(q, load_x(x[r][b].qs))));
        out[r] = std::fma(_cvtsh_ss(x[r][b].d) * dw, isum, out[r]);
      }
    }
  }
};

}  // namespace

float LEGACY_QUANT_NAME(dot_q4_1_q8_1)(const BlockQ4_1* w, const BlockQ8_1* x, int64_t n) {
  return simd::dot_single<MinDot<Q4_1Levels>>(w, x, n);
}
float LEGACY_QUANT_NAME(dot_q5_1_q8_1)(const BlockQ5_1* w, const BlockQ8_1* x, int64_t n) {
  return simd::dot_single<MinDot<Q5_1Levels>>(w, x, n);
}
float LEGACY_QUANT_NAME(dot_q5_0_q8_0)(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n) {
  return simd::dot_single<Q5_0Dot>(w, x, n);
}
float LEGACY_QUANT_NAME(dot_iq4_nl_q8_0)(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n) {
  return simd::dot_single<IQ4NLDot>(w, x, n);
}
void LEGACY_QUANT_NAME(dot_q4_1_q8_1_tile)(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out,
                             int64_t out_stride) {
  simd::dot_tile<MinDot<Q4_1Levels>>(w, x, x_stride, nx, n, out, out_stride);
}
void LEGACY_QUANT_NAME(dot_q5_1_q8_1_tile)(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out,
                             int64_t out_stride) {
  simd::dot_tile<MinDot<Q5_1Levels>>(w, x, x_stride, nx, n, out, out_stride);
}
void LEGACY_QUANT_NAME(dot_q5_0_q8_0_tile)(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out,
                             int64_t out_stride) {
  simd::dot_tile<Q5_0Dot>(w, x, x_stride, nx, n, out, out_stride);
}
void LEGACY_QUANT_NAME(dot_iq4_nl_q8_0_tile)(const void* w, const void* x, size_t x_stride, int nx, int64_t n, float* out,
                               int64_t out_stride) {
  simd::dot_tile<IQ4NLDot>(w, x, x_stride, nx, n, out, out_stride);
}

void LEGACY_QUANT_NAME(quantize_row_q8_1)(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const Q8Block256 q = quantize_q8_block_256(x + b * kQK8_0);
    const float d = q.amax / 127.0f;
    const int32_t sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q.q[0], q.q[1]), _mm256_add_epi32(q.q[2], q.q[3])));
    y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    y[b].s = _cvtss_sh(d * static_cast<float>(sum), _MM_FROUND_TO_NEAREST_INT);
    store_q8_quants_256(q, y[b].qs);
  }
}

}  // namespace glacier::kernels
