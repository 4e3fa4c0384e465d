// K-quant dots. Q4_K, Q5_K and Q6_K (the types packed at load) take one exact integer per super-block,
// the sum of scale * q * q8 over its 256 elements, fused into one float accumulator with
// d = q8.d * fp16(w.d), then Q4_K/Q5_K's mins term (mins times the Q8_K block sums, one integer) with
// dmin = -q8.d * fp16(w.dmin): so a GEMM may sum a sub-block's products in any order and apply its
// scale once. Q2_K, Q3_K and IQ4_XS keep ggml-cpu's AVX2 order: per super-block, lane l (0..7) holds the
// integer sum over elements with (i mod 32) in [4l, 4l + 4), fused into 8 float lanes summed by hsum8.
#include "kernels/ref/dot_k_quant_ref.h"

#include <cmath>

#include "kernels/k_quant_layout.h"
#include "kernels/ref/block_dot_order.h"

namespace glacier::kernels {

namespace {

using ref::hsum8;

// Sum of the 32 activation q's of sub-block s, from the two 16-element block sums.
int32_t sub_block_sum(const BlockQ8_K& x, int s) { return int32_t{x.bsums[2 * s]} + int32_t{x.bsums[2 * s + 1]}; }

// mins_k * sum(q8 of sub-block) paired two sub-blocks a lane: lane k covers sub-blocks 2k and 2k + 1.
void mins_lanes(const uint8_t* packed, const BlockQ8_K& x, int32_t (&lanes)[4]) {
  for (int k = 0; k < 4; ++k) {
    int s0, m0, s1, m1;
    k4_scale_min(packed, 2 * k, s0, m0);
    k4_scale_min(packed, 2 * k + 1, s1, m1);
    lanes[k] = m0 * sub_block_sum(x, 2 * k) + m1 * sub_block_sum(x, 2 * k + 1);
  }
}

// Integer lanes of one Q4_K/Q5_K super-block: scale of each 32-element sub-block times its q * q8.
template <class Block, int (*Level)(const Block&, int)>
void scaled_lanes_k4(const Block& w, const BlockQ8_K& x, int32_t (&lanes)[8]) {
  for (int32_t& l : lanes) l = 0;
  for (int s = 0; s < 8; ++s) {
    int scale, min;
    k4_scale_min(w.scales, s, scale, min);
    for (int l = 0; l < 8; ++l) {
      int32_t quad = 0;
      for (int e = 0; e < 4; ++e) {
        const int i = 32 * s + 4 * l + e;
        quad += Level(w, i) * int32_t{x.qs[i]};
      }
      lanes[l] += scale * quad;
    }
  }
}

// Integer lanes of one super-block of 16-element sub-blocks (Q2_K, Q3_K, Q6_K): in each 32-element
// chunk c, lanes 0-3 carry sub-block 2c and lanes 4-7 sub-block 2c + 1, each the scale times q * q8 over
// elements 4l..4l+3 of the chunk.
template <class Block, class Scale>
void scaled_lanes_16(const Block& w, const BlockQ8_K& x, int (*level)(const Block&, int), Scale scale,
                     int32_t (&lanes)[8]) {
  for (int32_t& l : lanes) l = 0;
  for (int s = 0; s < 16; ++s) {
    const int32_t sc = scale(s);
    for (int l = 4 * (s % 2); l < 4 * (s % 2) + 4; ++l) {
      int32_t quad = 0;
      for (int e = 0; e < 4; ++e) {
        const int i = 32 * (s / 2) + 4 * l + e;
        quad += level(w, i) * int32_t{x.qs[i]};
      }
      lanes[l] += sc * quad;
    }
  }
}

int32_t lanes_total(const int32_t (&lanes)[8]) {
  int32_t total = 0;
  for (int32_t l : lanes) total += l;
  return total;
}

// Q4_K (Level q4_k_level) and Q5_K: per super-block the levels' integer, then the mins' (exact: at
// most 8 * 63 * 32 * 31 * 127 and 8 * 63 * 32 * 127, far inside int32).
template <class Block, int (*Level)(const Block&, int)>
float dot_k4_ref(const Block* w, const BlockQ8_K* x, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = x[b].d * fp16_to_f32(w[b].d);
    const float dmin = -x[b].d * fp16_to_f32(w[b].dmin);
    int32_t lanes[8], mins[4];
    scaled_lanes_k4<Block, Level>(w[b], x[b], lanes);
    mins_lanes(w[b].scales, x[b], mins);
    acc = std::fma(d, static_cast<float>(lanes_total(lanes)), acc);
    acc = std::fma(dmin, static_cast<float>((mins[0] + mins[1]) + (mins[2] + mins[3])), acc);
  }
  return acc;
}

}  // namespace

float dot_q4_k_q8_k_ref(const BlockQ4_K* w, const BlockQ8_K* x, int64_t n) {
  return dot_k4_ref<BlockQ4_K, q4_k_level>(w, x, n);
}

float dot_q5_k_q8_k_ref(const BlockQ5_K* w, const BlockQ8_K* x, int64_t n) {
  return dot_k4_ref<BlockQ5_K, q5_k_level>(w, x, n);
}

namespace {

// Q3_K: the lanes of scaled_lanes_16 fused into the accumulator with d = x.d * fp16(w.d).
template <class Block>
float dot_sub16_ref(const Block* w, const BlockQ8_K* x, int64_t n, int (*level)(const Block&, int),
                    int (*scale)(const Block&, int)) {
  float acc[8] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = x[b].d * fp16_to_f32(w[b].d);
    int32_t lanes[8];
    scaled_lanes_16(w[b], x[b], level, [&](int s) { return int32_t{scale(w[b], s)}; }, lanes);
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(d, static_cast<float>(lanes[l]), acc[l]);
  }
  return hsum8(acc);
}

}  // namespace

// Q6_K: the super-block's integer (at most 256 * 128 * 32 * 127 in magnitude) fused with d = x.d * fp16(w.d).
float dot_q6_k_q8_k_ref(const BlockQ6_K* w, const BlockQ8_K* x, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t lanes[8];
    scaled_lanes_16(w[b], x[b], q6_k_level, [&](int s) { return int32_t{w[b].scales[s]}; }, lanes);
    acc = std::fma(x[b].d * fp16_to_f32(w[b].d), static_cast<float>(lanes_total(lanes)), acc);
  }
  return acc;
}

float dot_q3_k_q8_k_ref(const BlockQ3_K* w, const BlockQ8_K* x, int64_t n) {
  return dot_sub16_ref(w, x, n, q3_k_level, q3_k_scale);
}

// Q2_K: the mins term first, in 8 lanes (lane k: sub-blocks 2k and 2k + 1 against their 16-element
// block sums) with dmin = -x.d * fp16(w.dmin), then the scaled levels with d = x.d * fp16(w.d), both
// into the same accumulator.
float dot_q2_k_q8_k_ref(const BlockQ2_K* w, const BlockQ8_K* x, int64_t n) {
  float acc[8] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = x[b].d * fp16_to_f32(w[b].d);
    const float dmin = -x[b].d * fp16_to_f32(w[b].dmin);
    for (int k = 0; k < 8; ++k) {
      const int32_t mins = (w[b].scales[2 * k] >> 4) * int32_t{x[b].bsums[2 * k]} +
                           (w[b].scales[2 * k + 1] >> 4) * int32_t{x[b].bsums[2 * k + 1]};
      acc[k] = std::fma(dmin, static_cast<float>(mins), acc[k]);
    }
    int32_t lanes[8];
    scaled_lanes_16(w[b], x[b], q2_k_level, [&](int s) { return int32_t{w[b].scales[s] & 0x0f}; }, lanes);
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(d, static_cast<float>(lanes[l]), acc[l]);
  }
  return hsum8(acc);
}

// IQ4_XS: the same 8 lanes, each sub-block's signed scale times its table levels times q8, with
// d = fp16(w.d) * x.d.
float dot_iq4_xs_q8_k_ref(const BlockIQ4_XS* w, const BlockQ8_K* x, int64_t n) {
  float acc[8] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = fp16_to_f32(w[b].d) * x[b].d;
    int32_t lanes[8] = {};
    for (int s = 0; s < 8; ++s) {
      const int32_t scale = iq4_xs_scale(w[b], s);
      for (int l = 0; l < 8; ++l) {
        int32_t quad = 0;
        for (int e = 0; e < 4; ++e) {
          const int i = 32 * s + 4 * l + e;
          quad += iq4_xs_level(w[b], i) * int32_t{x[b].qs[i]};
        }
        lanes[l] += scale * quad;
      }
    }
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(d, static_cast<float>(lanes[l]), acc[l]);
  }
  return hsum8(acc);
}

void quantize_row_q8_k_ref(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    float amax = 0.0f, max = 0.0f;  // largest magnitude and its signed value (first on ties)
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    BlockQ8_K& out = y[b];
    // -127/max puts the extreme element at -127 whatever its sign, so q never needs -128.
    const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
    if (amax == 0.0f || !std::isfinite(iscale)) {
      // All zero, or a subnormal max whose multiplier overflows: ggml's integer rounding trick turns
      // every q into 0 there, and d = 1/iscale is then a signed zero.
      out.d = amax == 0.0f ? 0.0f : 1.0f / iscale;
      for (int8_t& q : out.qs) q = 0;
      for (int16_t& s : out.bsums) s = 0;
      continue;
    }
    // ggml rounds with nearest_int(iscale * x), i.e. adds 1.5 * 2^23 and keeps the mantissa; its
    // build contracts that multiply-add into one fma, so the exact product is rounded (half to even)
    // without first rounding it to float. Matched against the synth-llama-q4_k logits, where the
    // separately rounded product flips one activation and moves logits by 0.04.
    constexpr float kMagic = 12582912.0f;
    for (int j = 0; j < kQK_K; ++j)
      out.qs[j] = static_cast<int8_t>(std::fmin(127.0f, std::fma(iscale, xb[j], kMagic) - kMagic));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 16 * g; j < 16 * g + 16; ++j) sum += out.qs[j];
      out.bsums[g] = static_cast<int16_t>(sum);
    }
    out.d = 1.0f / iscale;
  }
}

}  // namespace glacier::kernels
