// AVX2 attention and SwiGLU (definitions in attention.h) for CPUs without AVX-512: each 16-lane step of
// the definition as two 8-lane halves, masks as blends, exp as exp_approx.h.
#include <immintrin.h>

#include <cmath>

#include "kernels/attention.h"
#include "kernels/exp_approx.h"

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

// tree16 across 16 vectors, lane by lane (c is consumed).
__m256 tree16(__m256 (&c)[kKeyTile]) {
  for (int width = kKeyTile / 2; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) c[i] = _mm256_add_ps(c[i + width], c[i]);
  return c[0];
}

// tree16 of one 16-lane value held as two halves: lane i + lane i+8 is low + high.
float halving_sum(__m256 low, __m256 high) {
  const __m256 h = _mm256_add_ps(high, low);
  __m128 q = _mm_add_ps(_mm256_extractf128_ps(h, 1), _mm256_castps256_ps128(h));
  q = _mm_add_ps(_mm_movehl_ps(q, q), q);
  q = _mm_add_ss(_mm_movehdup_ps(q), q);
  return _mm_cvtss_f32(q);
}

// Lanes [8 half, 8 half + 8) of tile j that lie inside [first, last], as an all-ones/zero lane mask.
__m256 visible(int32_t j, int half, int32_t first, int32_t last) {
  const __m256i t = _mm256_add_epi32(_mm256_set1_epi32(j * kKeyTile + kHalf * half), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i after_first = _mm256_cmpgt_epi32(t, _mm256_set1_epi32(first - 1));
  const __m256i before_last = _mm256_cmpgt_epi32(_mm256_set1_epi32(last + 1), t);
  return _mm256_castsi256_ps(_mm256_and_si256(after_first, before_last));
}

void attend_head(const AttentionArgs& a, const float* q, float* s, float* lane_acc, float* out) {
  const int32_t j0 = a.first / kKeyTile, j1 = a.last / kKeyTile + 1;
  const __m256 scale = _mm256_set1_ps(a.scale), minus_inf = _mm256_set1_ps(-INFINITY);
  const bool capped = a.softcap > 0.0f;
  const __m256 cap = _mm256_set1_ps(a.softcap), inv_cap = _mm256_set1_ps(capped ? 1.0f / a.softcap : 0.0f);
  __m256 maxv = minus_inf;
  for (int32_t j = j0; j < j1; ++j) {
    const float* tile = a.key_tiles + static_cast<size_t>(j) * a.tile_stride;
    for (int half = 0; half < 2; ++half) {
      __m256 c[kKeyTile];
      for (__m256& v : c) v = _mm256_setzero_ps();
      for (int32_t d = 0; d < a.hd; ++d)
        c[d % kKeyTile] = _mm256_fmadd_ps(_mm256_set1_ps(q[d]), _mm256_loadu_ps(tile + d * kKeyTile + kHalf * half), c[d % kKeyTile]);
      __m256 sv = _mm256_mul_ps(tree16(c), scale);
      if (capped) sv = softcap8(sv, cap, inv_cap);
      sv = _mm256_blendv_ps(minus_inf, sv, visible(j, half, a.first, a.last));
      _mm256_storeu_ps(s + (j - j0) * kKeyTile + kHalf * half, sv);
      maxv = _mm256_max_ps(maxv, sv);
    }
  }
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
  const float inv = static_cast<float>(1.0 / sum);
  const int32_t row = (a.hd + kHalf - 1) / kHalf * kHalf;
  for (int32_t i = 0; i < kKeyTile * row; i += kHalf) _mm256_storeu_ps(lane_acc + i, _mm256_setzero_ps());
  const int32_t base = j0 * kKeyTile, full = a.hd / kHalf * kHalf;
  for (int32_t t = a.first; t <= a.last; ++t) {
    const float p = s[t - base] * inv;
    const float* vt = a.values + static_cast<int64_t>(t) * a.value_stride;
    float* acc = lane_acc + (t % kKeyTile) * row;
    int32_t d = 0;
    for (; d < full; d += kHalf)
      _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(_mm256_set1_ps(p), _mm256_loadu_ps(vt + d), _mm256_loadu_ps(acc + d)));
    for (; d < a.hd; ++d) acc[d] = std::fma(p, vt[d], acc[d]);  // dimensions past the last full vector
  }
  for (int32_t d = 0; d < full; d += kHalf) {
    __m256 c[kKeyTile];
    for (int i = 0; i < kKeyTile; ++i) c[i] = _mm256_loadu_ps(lane_acc + i * row + d);
    _mm256_storeu_ps(out + d, tree16(c));
  }
  for (int32_t d = full; d < a.hd; ++d) {
    float c[kKeyTile];
    for (int i = 0; i < kKeyTile; ++i) c[i] = lane_acc[i * row + d];
    for (int width = kKeyTile / 2; width >= 1; width /= 2)
      for (int i = 0; i < width; ++i) c[i] = c[i + width] + c[i];
    out[d] = c[0];
  }
}

}  // namespace

void attend_avx2(const AttentionArgs& a) {
  const int32_t n = a.last + 1;  // positions the scratch covers
  float* lane_acc = a.scores + static_cast<size_t>(a.n_q) * (n + kKeyTile);
  const size_t row = static_cast<size_t>((a.hd + 15) / 16 * 16);
  for (int32_t h = 0; h < a.n_q; ++h)
    attend_head(a, a.q + h * a.q_stride, a.scores + static_cast<size_t>(h) * (n + kKeyTile),
                lane_acc + static_cast<size_t>(h) * kKeyTile * row, a.out + h * a.out_stride);
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
