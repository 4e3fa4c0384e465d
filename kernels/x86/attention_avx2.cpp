// AVX2 attention and SwiGLU (definitions in attention.h) for CPUs without AVX-512: each 16-lane step of
// the definition as two 8-lane halves, masks as blends, exp as exp_approx.h.
#include <immintrin.h>

#include <cmath>

#include "kernels/attention.h"
#include "kernels/exp_approx.h"
#include "kernels/x86/attention_value_blocks.h"
#include "kernels/x86/lanes_256.h"

namespace glacier::kernels {

namespace {

constexpr int kHalf = 8;

__m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpMin)), _mm256_set1_ps(kExpMax));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpTaylor[7]);
  for (int k = 6; k >= 0; --k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpTaylor[k]));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// exp_approx.h's softcap_approx, lane by lane.
__m256 softcap8(__m256 s, __m256 cap, __m256 inv_cap) {
  const __m256 y = _mm256_mul_ps(s, inv_cap);
  const __m256 e = exp8(_mm256_add_ps(y, y));
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_mul_ps(cap, _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one))));
}

// tree16 of one 16-lane value held as two halves: lane i + lane i+8 is low + high.
float halving_sum(__m256 low, __m256 high) { return hsum8(_mm256_add_ps(high, low)); }

// Lanes [8 half, 8 half + 8) of tile j that lie inside [first, last], as an all-ones/zero lane mask.
__m256 visible(int32_t j, int half, int32_t first, int32_t last) {
  const __m256i t = _mm256_add_epi32(_mm256_set1_epi32(j * kKeyTile + kHalf * half), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i after_first = _mm256_cmpgt_epi32(t, _mm256_set1_epi32(first - 1));
  const __m256i before_last = _mm256_cmpgt_epi32(_mm256_set1_epi32(last + 1), t);
  return _mm256_castsi256_ps(_mm256_and_si256(after_first, before_last));
}

// Lanes i of tree16's first level, c_i + c_{i+8}, for i in [i0, i0 + 4): the chains c_l (the sum over
// d = l mod 16, ascending, of q[d] * k[d], k at tile + d * 16) of eight positions. Eight chains at a time
// stay in the 16 ymm registers (an index d % 16 on one array of 16 kept them on the stack).
template <int i0>
void first_level(const float* q, const float* k, int32_t hd, __m256 (&sums)[4]) {
  __m256 lo[4], hi[4];
  for (int i = 0; i < 4; ++i) lo[i] = hi[i] = _mm256_setzero_ps();
  int32_t d0 = 0;
  for (; d0 + kKeyTile <= hd; d0 += kKeyTile) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      lo[i] = _mm256_fmadd_ps(_mm256_set1_ps(q[d0 + i0 + i]), _mm256_loadu_ps(k + (d0 + i0 + i) * kKeyTile), lo[i]);
      hi[i] = _mm256_fmadd_ps(_mm256_set1_ps(q[d0 + i0 + 8 + i]), _mm256_loadu_ps(k + (d0 + i0 + 8 + i) * kKeyTile), hi[i]);
    }
  }
  for (int i = 0; i < 4; ++i) {  // a head size off the multiple of 16: the chains that have one more term
    if (d0 + i0 + i < hd) lo[i] = _mm256_fmadd_ps(_mm256_set1_ps(q[d0 + i0 + i]), _mm256_loadu_ps(k + (d0 + i0 + i) * kKeyTile), lo[i]);
    if (d0 + i0 + 8 + i < hd)
      hi[i] = _mm256_fmadd_ps(_mm256_set1_ps(q[d0 + i0 + 8 + i]), _mm256_loadu_ps(k + (d0 + i0 + 8 + i) * kKeyTile), hi[i]);
  }
  for (int i = 0; i < 4; ++i) sums[i] = _mm256_add_ps(hi[i], lo[i]);
}

// tree16(c) of one half tile's eight positions: the first level in two quarters, then +4, +2, +1.
__m256 half_tile_dot(const float* q, const float* k, int32_t hd) {
  __m256 a[4], b[4];
  first_level<0>(q, k, hd, a);
  first_level<4>(q, k, hd, b);
  for (int i = 0; i < 4; ++i) a[i] = _mm256_add_ps(b[i], a[i]);
  a[0] = _mm256_add_ps(a[2], a[0]);
  a[1] = _mm256_add_ps(a[3], a[1]);
  return _mm256_add_ps(a[1], a[0]);
}

// Scores s_t of every head (head h's at scores + h * stride, index t - 16 j0), tile by tile: the query
// heads of a group use each key tile while it is in L1.
void scores(const AttentionArgs& a, size_t stride) {
  const int32_t j0 = a.first / kKeyTile, j1 = a.last / kKeyTile + 1;
  const __m256 scale = _mm256_set1_ps(a.scale), minus_inf = _mm256_set1_ps(-INFINITY);
  const bool capped = a.softcap > 0.0f;
  const __m256 cap = _mm256_set1_ps(a.softcap), inv_cap = _mm256_set1_ps(capped ? 1.0f / a.softcap : 0.0f);
  for (int32_t j = j0; j < j1; ++j) {
    const float* tile = a.key_tiles + static_cast<size_t>(j) * a.tile_stride;
    for (int32_t h = 0; h < a.n_q; ++h) {
      const float* q = a.q + h * a.q_stride;
      for (int half = 0; half < 2; ++half) {
        __m256 sv = _mm256_mul_ps(half_tile_dot(q, tile + kHalf * half, a.hd), scale);
        if (capped) sv = softcap8(sv, cap, inv_cap);
        sv = _mm256_blendv_ps(minus_inf, sv, visible(j, half, a.first, a.last));
        _mm256_storeu_ps(a.scores + h * stride + (j - j0) * kKeyTile + kHalf * half, sv);
      }
    }
  }
}

// One head's scores in s become its softmax weights p_t.
void softmax(const AttentionArgs& a, float* s) {
  const int32_t j0 = a.first / kKeyTile, j1 = a.last / kKeyTile + 1;
  __m256 maxv = _mm256_set1_ps(-INFINITY);
  for (int32_t i = 0; i < (j1 - j0) * kKeyTile; i += kHalf) maxv = _mm256_max_ps(maxv, _mm256_loadu_ps(s + i));
  float lanes[kHalf];
  _mm256_storeu_ps(lanes, maxv);
  float mx = lanes[0];
  for (float l : lanes) mx = std::fmax(mx, l);
  const __m256 m = _mm256_set1_ps(mx);
  double sum = 0.0;
  for (int32_t j = j0; j < j1; ++j) {
    __m256 e[2];
    for (int half = 0; half < 2; ++half) {
      float* p = s + (j - j0) * kKeyTile + kHalf * half;
      e[half] = _mm256_and_ps(visible(j, half, a.first, a.last), exp8(_mm256_sub_ps(_mm256_loadu_ps(p), m)));
      _mm256_storeu_ps(p, e[half]);
    }
    sum += static_cast<double>(halving_sum(e[0], e[1]));
  }
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  for (int32_t i = 0; i < (j1 - j0) * kKeyTile; i += kHalf) _mm256_storeu_ps(s + i, _mm256_mul_ps(_mm256_loadu_ps(s + i), inv));
}

// Dimensions [d, d + D) of the outputs of heads [h0, h0 + H): each dimension's 16 lane chains (lane l
// takes the positions l mod 16) are two 8-lane vectors, a tile's value row for that dimension times the
// tile's 16 weights, then tree16 of the lanes. The H heads share every value row read. Lanes outside
// [first, last] (only in the window's first and last tiles) are masked to zero before the product, as
// their weights are: they add exactly nothing, whatever the cache holds there.
template <int D, int H>
void value_block(const AttentionArgs& a, size_t stride, int32_t h0, int32_t d) {
  const int32_t j0 = a.first / kKeyTile, j1 = a.last / kKeyTile + 1;
  __m256 c[H][D][2];
  for (auto& head : c)
    for (auto& x : head) x[0] = x[1] = _mm256_setzero_ps();
  const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  for (int32_t j = j0; j < j1; ++j) {
    const float* rows = a.value_tiles + static_cast<size_t>(j) * a.tile_stride + static_cast<size_t>(d) * kKeyTile;
    __m256 p[H][2];
    for (int h = 0; h < H; ++h)
      for (int half = 0; half < 2; ++half) p[h][half] = _mm256_loadu_ps(a.scores + (h0 + h) * stride + (j - j0) * kKeyTile + kHalf * half);
    const bool whole = j * kKeyTile >= a.first && j * kKeyTile + kKeyTile - 1 <= a.last;
    const __m256 m0 = whole ? all : visible(j, 0, a.first, a.last), m1 = whole ? all : visible(j, 1, a.first, a.last);
#pragma GCC unroll 8
    for (int i = 0; i < D; ++i) {
      __m256 v0 = _mm256_loadu_ps(rows + i * kKeyTile), v1 = _mm256_loadu_ps(rows + i * kKeyTile + kHalf);
      if (!whole) v0 = _mm256_and_ps(m0, v0), v1 = _mm256_and_ps(m1, v1);
      for (int h = 0; h < H; ++h) {
        c[h][i][0] = _mm256_fmadd_ps(p[h][0], v0, c[h][i][0]);
        c[h][i][1] = _mm256_fmadd_ps(p[h][1], v1, c[h][i][1]);
      }
    }
  }
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < D; ++i) a.out[(h0 + h) * a.out_stride + d + i] = halving_sum(c[h][i][0], c[h][i][1]);
}

// Outputs, in attention_value_blocks.h's order with 4 dimension x head chains a block (eight ymm (two halves a dimension)).
// On the Zen 5 VM, a group of 8 heads over 512 positions took 0.90 of the time of one head at a time.
void weighted_values(const AttentionArgs& a, size_t stride) {
  x86::for_each_value_block<4>(a, [&](auto dims, auto heads, int32_t h0, int32_t d) {
    value_block<decltype(dims)::value, decltype(heads)::value>(a, stride, h0, d);
  });
}

}  // namespace

void attend_avx2(const AttentionArgs& a) {
  const size_t stride = static_cast<size_t>(a.last + 1) + kKeyTile;  // one head's scores in the scratch
  scores(a, stride);
  for (int32_t h = 0; h < a.n_q; ++h) softmax(a, a.scores + h * stride);
  weighted_values(a, stride);
}

double sum_exp_avx2(const float* x, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  double sum = 0.0;
  int64_t i = 0;
  for (; i + kKeyTile <= n; i += kKeyTile)
    sum += static_cast<double>(halving_sum(exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)),
                                           exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + kHalf), s))));
  if (i < n) {  // the last chunk, zero past n
    float c[kKeyTile] = {};
    for (int64_t k = i; k < n; ++k) c[k - i] = x[k];
    const __m256 lo = _mm256_loadu_ps(c), hi = _mm256_loadu_ps(c + kHalf);
    const __m256 vlo = _mm256_and_ps(visible(0, 0, 0, static_cast<int32_t>(n - i - 1)), exp8(_mm256_sub_ps(lo, s)));
    const __m256 vhi = _mm256_and_ps(visible(0, 1, 0, static_cast<int32_t>(n - i - 1)), exp8(_mm256_sub_ps(hi, s)));
    sum += static_cast<double>(halving_sum(vlo, vhi));
  }
  return sum;
}

void swiglu_avx2(const float* gate, const float* up, int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + kHalf <= n; i += kHalf) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, exp8(_mm256_xor_ps(g, sign))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = silu_approx(gate[i]) * up[i];  // the same arithmetic, one lane
}

}  // namespace glacier::kernels
