// AVX2 attention and SwiGLU (definitions in attention.h) for CPUs without AVX-512: each 16-lane step of
// the definition as two 8-lane halves, masks as blends, exp as exp_approx.h.
#include <immintrin.h>

#include <algorithm>
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

// Chain i of the scores of heads [h0, h0 + H) against tiles [j, j + T): lane l of chain[i][h][t][half]
// is the fma chain over d = i, i + 16, ... < hd of q[d] * k[d] for position 16 (j + t) + 8 half + l.
// One pass a chain keeps its 2 H T sums in registers: a key row serves the H heads and a broadcast of
// q[d] serves the T tiles, so a block loads (2 T + H) vectors for 2 H T products where one head and one
// half tile at a time loaded two for one (the 16 chains of eight positions already filled the 16
// registers, so nothing else could be shared).
template <int H, int T>
void score_chains(const AttentionArgs& a, int32_t h0, int32_t j, __m256 (&chain)[kKeyTile][H][T][2]) {
  const float* q[H];
  for (int h = 0; h < H; ++h) q[h] = a.q + (h0 + h) * a.q_stride;
  const float* tile[T];
  for (int t = 0; t < T; ++t) tile[t] = a.key_tiles + static_cast<size_t>(j + t) * a.tile_stride;
  for (int i = 0; i < kKeyTile; ++i) {
    __m256 acc[H][T][2];
    for (auto& head : acc)
      for (auto& halves : head) halves[0] = halves[1] = _mm256_setzero_ps();
    for (int32_t d = i; d < a.hd; d += kKeyTile) {
      __m256 k[T][2];
      for (int t = 0; t < T; ++t)
        for (int half = 0; half < 2; ++half) k[t][half] = _mm256_loadu_ps(tile[t] + d * kKeyTile + kHalf * half);
      for (int h = 0; h < H; ++h) {
        const __m256 qd = _mm256_set1_ps(q[h][d]);
        for (int t = 0; t < T; ++t)
          for (int half = 0; half < 2; ++half) acc[h][t][half] = _mm256_fmadd_ps(qd, k[t][half], acc[h][t][half]);
      }
    }
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t)
        for (int half = 0; half < 2; ++half) chain[i][h][t][half] = acc[h][t][half];
  }
}

// tree16 of one score's 16 chains, eight positions a lane: c_i + c_{i+8}, then +4, +2, +1.
template <class Chain>
__m256 tree16_of_chains(Chain&& c) {
  __m256 x[kHalf];
  for (int i = 0; i < kHalf; ++i) x[i] = _mm256_add_ps(c(i + kHalf), c(i));
  for (int width = kHalf / 2; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) x[i] = _mm256_add_ps(x[i + width], x[i]);
  return x[0];
}

// What turns a score's tree16 into the stored s_t: the scale, the soft-cap where there is one, and -inf
// outside [first, last].
struct ScoreFinish {
  __m256 scale, cap, inv_cap;
  bool capped;
};

template <int H, int T>
void score_block(const AttentionArgs& a, size_t stride, int32_t h0, int32_t j, int32_t j0, const ScoreFinish& f) {
  __m256 chain[kKeyTile][H][T][2];
  score_chains<H, T>(a, h0, j, chain);
  for (int h = 0; h < H; ++h)
    for (int t = 0; t < T; ++t)
      for (int half = 0; half < 2; ++half) {
        __m256 sv = _mm256_mul_ps(tree16_of_chains([&](int i) { return chain[i][h][t][half]; }), f.scale);
        if (f.capped) sv = softcap8(sv, f.cap, f.inv_cap);
        sv = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), sv, visible(j + t, half, a.first, a.last));
        _mm256_storeu_ps(a.scores + (h0 + h) * stride + (j + t - j0) * kKeyTile + kHalf * half, sv);
      }
}

// Tiles a group of score blocks shares: 64 positions (16 KB of keys at head size 64) stay in L1 while
// every head of the group reads them.
constexpr int32_t kScoreGroupTiles = 4;

// Scores s_t of every head (head h's at scores + h * stride, index t - 16 j0): per group of tiles, the
// head blocks of attention_value_blocks.h, four heads against one tile, two against two tiles, one against
// four (each block eight vector sums), the tiles past the group's last whole block one at a time.
void scores(const AttentionArgs& a, size_t stride) {
  const int32_t j0 = a.first / kKeyTile, j1 = a.last / kKeyTile + 1;
  const bool capped = a.softcap > 0.0f;
  const ScoreFinish f{_mm256_set1_ps(a.scale), _mm256_set1_ps(a.softcap), _mm256_set1_ps(capped ? 1.0f / a.softcap : 0.0f),
                      capped};
  for (int32_t g = j0; g < j1; g += kScoreGroupTiles) {
    const int32_t g1 = std::min(j1, g + kScoreGroupTiles);
    x86::for_each_head_block(a.n_q, [&](auto h_tag, int32_t h0) {
      constexpr int H = decltype(h_tag)::value, T = kScoreGroupTiles / H;
      int32_t j = g;
      for (; j + T <= g1; j += T) score_block<H, T>(a, stride, h0, j, j0, f);
      for (; j < g1; ++j) score_block<H, 1>(a, stride, h0, j, j0, f);
    });
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
    // The weights are read where they are multiplied (a memory operand of the fma): loaded ahead into
    // registers, eight of them with eight sums and a value row outgrew the 16 and went through the stack.
    const float* p[H];
    for (int h = 0; h < H; ++h) p[h] = a.scores + (h0 + h) * stride + (j - j0) * kKeyTile;
    const bool whole = j * kKeyTile >= a.first && j * kKeyTile + kKeyTile - 1 <= a.last;
    const __m256 m0 = whole ? all : visible(j, 0, a.first, a.last), m1 = whole ? all : visible(j, 1, a.first, a.last);
#pragma GCC unroll 8
    for (int i = 0; i < D; ++i) {
      __m256 v0 = _mm256_loadu_ps(rows + i * kKeyTile), v1 = _mm256_loadu_ps(rows + i * kKeyTile + kHalf);
      if (!whole) v0 = _mm256_and_ps(m0, v0), v1 = _mm256_and_ps(m1, v1);
      for (int h = 0; h < H; ++h) {
        c[h][i][0] = _mm256_fmadd_ps(_mm256_loadu_ps(p[h]), v0, c[h][i][0]);
        c[h][i][1] = _mm256_fmadd_ps(_mm256_loadu_ps(p[h] + kHalf), v1, c[h][i][1]);
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
