// AVX-512 attention and SwiGLU (definitions in attention.h): 16 key positions a vector from the
// transposed key tiles, the sums' 16 lanes as 16 independent chains, exp as exp_approx.h.
#include <immintrin.h>

#include <cmath>

#include "kernels/x86/gcc_undefined_vector_warning.h"

#include "kernels/attention.h"
#include "kernels/exp_approx.h"
#include "kernels/x86/attention_value_blocks.h"
#include "kernels/x86/lanes_256.h"

namespace glacier::kernels {

namespace {

__m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpMin)), _mm512_set1_ps(kExpMax));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpTaylor[7]);
  for (int k = 6; k >= 0; --k) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpTaylor[k]));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

// exp_approx.h's softcap_approx, lane by lane.
__m512 softcap16(__m512 s, __m512 cap, __m512 inv_cap) {
  const __m512 y = _mm512_mul_ps(s, inv_cap);
  const __m512 e = exp16(_mm512_add_ps(y, y));
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_mul_ps(cap, _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one))));
}

// attention.h's tree16 on one vector: lane i + lane i+8, then +4, +2, +1.
float halving_sum(__m512 v) { return hsum8(_mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v))); }

// tree16 across 16 vectors, lane by lane (c is consumed).
__m512 tree16(__m512 (&c)[kKeyTile]) {
  for (int width = kKeyTile / 2; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) c[i] = _mm512_add_ps(c[i + width], c[i]);
  return c[0];
}

// Lanes of tile j (positions 16j .. 16j+15) inside [first, last].
__mmask16 visible(int32_t j, int32_t first, int32_t last) {
  const int32_t t0 = j * kKeyTile;
  uint32_t m = 0xffff;
  if (first > t0) m &= 0xffffu << (first - t0);
  if (last < t0 + kKeyTile - 1) m &= 0xffffu >> (t0 + kKeyTile - 1 - last);
  return static_cast<__mmask16>(m);
}

// tree16 of one head's 16 chains over one key tile: c_l, the sum over d = l mod 16 of q[d] * k[d], for a
// head size off the multiple of 16 (the rest take tile_dots).
inline __m512 tile_dot_any(const float* q, const float* tile, int32_t hd) {
  __m512 c[kKeyTile];
  for (__m512& v : c) v = _mm512_setzero_ps();
  int32_t d0 = 0;
  for (; d0 + kKeyTile <= hd; d0 += kKeyTile) {
#pragma GCC unroll 16
    for (int l = 0; l < kKeyTile; ++l)
      c[l] = _mm512_fmadd_ps(_mm512_set1_ps(q[d0 + l]), _mm512_loadu_ps(tile + (d0 + l) * kKeyTile), c[l]);
  }
#pragma GCC unroll 16
  for (int l = 0; l < kKeyTile; ++l)
    if (d0 + l < hd) c[l] = _mm512_fmadd_ps(_mm512_set1_ps(q[d0 + l]), _mm512_loadu_ps(tile + (d0 + l) * kKeyTile), c[l]);
  return tree16(c);
}

// tree16's first level, c_i + c_{i+8} for i in [i0, i0 + 4), of H heads' chains over one key tile (hd a
// multiple of 16). The heads share every key row loaded; 8 H chains at a time stay in registers (an
// index d % 16, or a tail's conditional updates, kept them on the stack).
template <int i0, int H>
inline void first_level(const float* const (&q)[H], const float* tile, int32_t hd, __m512 (&sums)[H][4]) {
  __m512 lo[H][4], hi[H][4];
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < 4; ++i) lo[h][i] = hi[h][i] = _mm512_setzero_ps();
  for (int32_t d0 = 0; d0 < hd; d0 += kKeyTile) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512 k_lo = _mm512_loadu_ps(tile + (d0 + i0 + i) * kKeyTile), k_hi = _mm512_loadu_ps(tile + (d0 + i0 + 8 + i) * kKeyTile);
      for (int h = 0; h < H; ++h) {
        lo[h][i] = _mm512_fmadd_ps(_mm512_set1_ps(q[h][d0 + i0 + i]), k_lo, lo[h][i]);
        hi[h][i] = _mm512_fmadd_ps(_mm512_set1_ps(q[h][d0 + i0 + 8 + i]), k_hi, hi[h][i]);
      }
    }
  }
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < 4; ++i) sums[h][i] = _mm512_add_ps(hi[h][i], lo[h][i]);
}

// tree16 of each of H heads' 16 chains over one key tile (hd a multiple of 16): the first level in two
// quarters, then +4, +2, +1.
template <int H>
inline void tile_dots(const float* const (&q)[H], const float* tile, int32_t hd, __m512 (&out)[H]) {
  __m512 a[H][4], b[H][4];
  first_level<0, H>(q, tile, hd, a);
  first_level<4, H>(q, tile, hd, b);
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < 4; ++i) a[h][i] = _mm512_add_ps(b[h][i], a[h][i]);
    out[h] = _mm512_add_ps(_mm512_add_ps(a[h][3], a[h][1]), _mm512_add_ps(a[h][2], a[h][0]));
  }
}

// Scores s_t of every head (head h's at scores + h * stride, index t - 16 j0), tile by tile: the query
// heads of a group use each key tile while it is in L1 (head by head, long prefill windows re-read
// every tile from L2 once per head). Soft-capped scores are left unmasked for cap_scores (the cap of
// -inf is not -inf); the cap's constants stay out of this loop, where they pushed the chains to the stack.
void scores(const AttentionArgs& a, size_t stride) {
  const int32_t j0 = a.first / kKeyTile, j1 = a.last / kKeyTile + 1;
  const __m512 scale = _mm512_set1_ps(a.scale), minus_inf = _mm512_set1_ps(-INFINITY);
  const bool capped = a.softcap > 0.0f, whole = a.hd % kKeyTile == 0;
  for (int32_t j = j0; j < j1; ++j) {
    const float* tile = a.key_tiles + static_cast<size_t>(j) * a.tile_stride;
    const __mmask16 vis = visible(j, a.first, a.last);
    auto store = [&](int32_t h, __m512 dot) {
      const __m512 sv = _mm512_mul_ps(dot, scale);
      _mm512_storeu_ps(a.scores + h * stride + (j - j0) * kKeyTile, capped ? sv : _mm512_mask_mov_ps(minus_inf, vis, sv));
    };
    int32_t h = 0;
    for (; whole && h + 2 <= a.n_q; h += 2) {  // two heads a key row
      const float* q[2] = {a.q + h * a.q_stride, a.q + (h + 1) * a.q_stride};
      __m512 dot[2];
      tile_dots<2>(q, tile, a.hd, dot);
      store(h, dot[0]);
      store(h + 1, dot[1]);
    }
    for (; h < a.n_q; ++h) {
      const float* q[1] = {a.q + h * a.q_stride};
      __m512 dot[1];
      if (whole) tile_dots<1>(q, tile, a.hd, dot);
      store(h, whole ? dot[0] : tile_dot_any(q[0], tile, a.hd));
    }
  }
}

// One head's scores in s soft-capped (gemma2), then masked to the window.
void cap_scores(const AttentionArgs& a, float* s) {
  const int32_t j0 = a.first / kKeyTile, j1 = a.last / kKeyTile + 1;
  const __m512 cap = _mm512_set1_ps(a.softcap), inv_cap = _mm512_set1_ps(1.0f / a.softcap), minus_inf = _mm512_set1_ps(-INFINITY);
  for (int32_t j = j0; j < j1; ++j) {
    float* sj = s + (j - j0) * kKeyTile;
    _mm512_storeu_ps(sj, _mm512_mask_mov_ps(minus_inf, visible(j, a.first, a.last), softcap16(_mm512_loadu_ps(sj), cap, inv_cap)));
  }
}

// One head's scores in s become its softmax weights p_t.
void softmax(const AttentionArgs& a, float* s) {
  const int32_t j0 = a.first / kKeyTile, j1 = a.last / kKeyTile + 1;
  __m512 maxv = _mm512_set1_ps(-INFINITY);
  for (int32_t j = j0; j < j1; ++j) maxv = _mm512_max_ps(maxv, _mm512_loadu_ps(s + (j - j0) * kKeyTile));
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(maxv));
  double sum = 0.0;
  for (int32_t j = j0; j < j1; ++j) {
    float* sj = s + (j - j0) * kKeyTile;
    const __m512 e = _mm512_maskz_mov_ps(visible(j, a.first, a.last), exp16(_mm512_sub_ps(_mm512_loadu_ps(sj), m)));
    _mm512_storeu_ps(sj, e);
    sum += static_cast<double>(halving_sum(e));
  }
  const __m512 inv_v = _mm512_set1_ps(static_cast<float>(1.0 / sum));
  for (int32_t j = j0; j < j1; ++j) _mm512_storeu_ps(s + (j - j0) * kKeyTile, _mm512_mul_ps(_mm512_loadu_ps(s + (j - j0) * kKeyTile), inv_v));
}

// Dimensions [d, d + D) of the outputs of heads [h0, h0 + H): each dimension's 16 lane chains (lane l
// takes the positions l mod 16) are one vector, a tile's value row for that dimension times the tile's 16
// weights, then tree16 of the vector's lanes. The H heads share every value row read. Lanes outside
// [first, last] (only in the window's first and last tiles) are masked to zero before the product, as
// their weights are: they add exactly nothing, whatever the cache holds there.
template <int D, int H>
void value_block(const AttentionArgs& a, size_t stride, int32_t h0, int32_t d) {
  const int32_t j0 = a.first / kKeyTile, j1 = a.last / kKeyTile + 1;
  __m512 c[H][D];
  for (auto& head : c)
    for (__m512& x : head) x = _mm512_setzero_ps();
  for (int32_t j = j0; j < j1; ++j) {
    const float* rows = a.value_tiles + static_cast<size_t>(j) * a.tile_stride + static_cast<size_t>(d) * kKeyTile;
    __m512 p[H];
    for (int h = 0; h < H; ++h) p[h] = _mm512_loadu_ps(a.scores + (h0 + h) * stride + (j - j0) * kKeyTile);
    const __mmask16 vis = visible(j, a.first, a.last);
#pragma GCC unroll 16
    for (int i = 0; i < D; ++i) {
      const __m512 v = vis == 0xffff ? _mm512_loadu_ps(rows + i * kKeyTile) : _mm512_maskz_mov_ps(vis, _mm512_loadu_ps(rows + i * kKeyTile));
      for (int h = 0; h < H; ++h) c[h][i] = _mm512_fmadd_ps(p[h], v, c[h][i]);
    }
  }
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < D; ++i) a.out[(h0 + h) * a.out_stride + d + i] = halving_sum(c[h][i]);
}

// Outputs, in attention_value_blocks.h's order with 16 dimension x head chains a block (16 zmm).
// On the Zen 5 VM, a group of 8 heads over 512 positions took 0.74 of the time of one head at a time.
void weighted_values(const AttentionArgs& a, size_t stride) {
  x86::for_each_value_block<16>(a, [&](auto dims, auto heads, int32_t h0, int32_t d) {
    value_block<decltype(dims)::value, decltype(heads)::value>(a, stride, h0, d);
  });
}

}  // namespace

void attend_avx512(const AttentionArgs& a) {
  const size_t stride = static_cast<size_t>(a.last + 1) + kKeyTile;  // one head's scores in the scratch
  scores(a, stride);
  for (int32_t h = 0; h < a.n_q; ++h) {
    if (a.softcap > 0.0f) cap_scores(a, a.scores + h * stride);
    softmax(a, a.scores + h * stride);
  }
  weighted_values(a, stride);
}

double sum_exp_avx512(const float* x, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  double sum = 0.0;
  for (int64_t i = 0; i < n; i += kKeyTile) {
    const __mmask16 m = n - i >= kKeyTile ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    sum += static_cast<double>(halving_sum(_mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s)))));
  }
  return sum;
}

void swiglu_avx512(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, exp16(_mm512_xor_ps(g, sign))));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, u));
  }
}

}  // namespace glacier::kernels
