// Attention of one query position over the cached keys and values of one KV head, for the query heads
// that share it (grouped-query attention). Keys and values are cached in tiles of 16 positions, transposed
// within a tile: 16 scores come from one vector per head dimension, and one vector per dimension holds
// the 16 lane sums of the weighted values. The arithmetic (defined below) has one
// order for every variant and does not depend on the batch: results are bitwise the same everywhere.
// Its sums are shaped as llama.cpp's CPU attention sums them (16-lane dot products, a double softmax
// sum of 16-position chunks), which keeps greedy goldens on knife-edge margins.
#pragma once
#include <cstddef>
#include <cstdint>

namespace glacier::kernels {

constexpr int kKeyTile = 16;  // positions per tile of keys or values

// Tile layout (keys and values alike): for KV head h, dimension d and position t0 + j of the tile:
// tile[(h * hd + d) * 16 + j]. So a tile of n_kv heads holds n_kv * hd * 16 floats. Lanes of positions
// outside the window may hold anything (never written, or NaN): the kernels mask them.
inline size_t tile_floats(int32_t n_kv, int32_t hd) { return static_cast<size_t>(n_kv) * hd * kKeyTile; }

struct AttentionArgs {
  const float* q;            // n_q query rows of hd floats, q_stride apart
  int64_t q_stride;
  int32_t n_q;               // query heads sharing this KV head
  const float* key_tiles;    // this slot's key tiles (tile j at key_tiles + j * tile_stride), at this head's offset
  const float* value_tiles;  // this slot's value tiles, the same way
  size_t tile_stride;        // floats from one tile to the next
  int32_t first, last;       // visible positions [first, last]
  int32_t hd;                // head dimension (any size; multiples of 16 are the fast cases)
  float scale;               // usually 1 / sqrt(hd)
  float softcap = 0.0f;      // > 0: scores soft-capped to (-softcap, softcap) before the softmax (gemma2)
  float* scores;             // scratch: attention_scratch_floats(n_q, last + 1) floats
  float* out;                // n_q rows of hd floats, out_stride apart
  int64_t out_stride;
};

// For each query head, in this order of floating-point operations, where tree16(c) adds 16 values by
// halving (c_i + c_{i+8}, then +4, +2, +1):
//   s_t = tree16(c) * scale, c_j = fma chain over d = j, j+16, ... < hd of q[d] * k_t[d], from 0
//   (with softcap > 0: s_t = softcap_approx(s_t, softcap, 1 / softcap), exp_approx.h)
//   m = max_t s_t;  e_t = exp_approx(s_t - m)   (exp_approx.h), for t in [first, last]
//   sum = double sum, chunk after chunk, of tree16(e over positions 16c .. 16c+15, 0 outside [first, last]);
//   p_t = e_t * float(1 / sum)
//   out[d] = tree16(c), c_j = fma chain over t = j mod 16 (ascending in [first, last]) of p_t * v_t[d], from 0
using AttendFn = void (*)(const AttentionArgs& a);
// Scratch an attend call needs for n_q heads over positions [0, n_positions): each head's scores (then
// softmax weights) for whole tiles.
inline size_t attention_scratch_floats(int32_t n_q, int32_t n_positions) {
  return static_cast<size_t>(n_q) * (static_cast<size_t>(n_positions) + kKeyTile);
}

void attend_ref(const AttentionArgs& a);
void attend_avx2(const AttentionArgs& a);
void attend_avx512(const AttentionArgs& a);

// The sum of exp_approx(x[i] - shift) over [0, n): double sum, chunk after chunk, of tree16 of 16
// elements (0 past n) — the softmax sum of attention, used for log-sum-exp over a vocabulary.
using SumExpFn = double (*)(const float* x, int64_t n, float shift);
double sum_exp_ref(const float* x, int64_t n, float shift);
double sum_exp_avx2(const float* x, int64_t n, float shift);
double sum_exp_avx512(const float* x, int64_t n, float shift);

// out[i] = silu(gate[i]) * up[i] with silu(x) = x / (1 + exp_approx(-x)) (arguments clamped as in
// exp_approx): the same floats on every variant.
using SwigluFn = void (*)(const float* gate, const float* up, int64_t n, float* out);
void swiglu_ref(const float* gate, const float* up, int64_t n, float* out);
void swiglu_avx2(const float* gate, const float* up, int64_t n, float* out);
void swiglu_avx512(const float* gate, const float* up, int64_t n, float* out);

}  // namespace glacier::kernels
