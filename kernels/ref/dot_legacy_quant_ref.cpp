// Q4_1/Q5_0/Q5_1/IQ4_NL dots in ggml-cpu's x86 (AVX2) arithmetic order. Lane l (0..7) of a block holds
// the exact integer sum of elements [4l, 4l + 4); the lanes are fused into an 8-lane float accumulator
// with d = fp16(w.d) * fp16(x.d) and summed by hsum8 at the end. Q4_1/Q5_1 add their min term
// m * x.s in a scalar accumulator beside it; IQ4_NL alternates two 8-lane accumulators (even and odd
// blocks) and fuses a last odd block as one scalar. The scalar terms (`sum += a * b` in ggml's C) use
// std::fma: GCC contracts them in ggml's gnu11 build (default -ffp-contract=fast), as it does the
// Q8_K rounding (dot_k_quant_ref.cpp); the goldens here come out the same either way.
#include "kernels/ref/dot_legacy_quant_ref.h"
#include "kernels/ref/block_dot_order.h"

#include <cmath>

namespace glacier::kernels {

namespace {

using ref::hsum8;

// Adds d * (lane sums of level(k) * qx[k]) to acc.
template <class Level>
void add_block_lanes(Level level, const int8_t* qx, float d, float (&acc)[8]) {
  for (int l = 0; l < 8; ++l) {
    int32_t isum = 0;
    for (int k = 4 * l; k < 4 * l + 4; ++k) isum += level(k) * int32_t{qx[k]};
    acc[l] = std::fma(d, static_cast<float>(isum), acc[l]);
  }
}

// Blocks with a min (Q4_1, Q5_1) against Q8_1.
template <class Block, class Level>
float dot_with_min(const Block* w, const BlockQ8_1* x, int64_t n, Level level) {
  float acc[8] = {};
  float summs = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    summs = std::fma(fp16_to_f32(w[b].m), fp16_to_f32(x[b].s), summs);
    const float d = fp16_to_f32(w[b].d) * fp16_to_f32(x[b].d);
    add_block_lanes([&](int k) { return level(w[b], k); }, x[b].qs, d, acc);
  }
  return hsum8(acc) + summs;
}

}  // namespace

float dot_q4_1_q8_1_ref(const BlockQ4_1* w, const BlockQ8_1* x, int64_t n) {
  return dot_with_min(w, x, n, [](const BlockQ4_1& b, int k) { return nibble_level(b.qs, k); });
}

float dot_q5_1_q8_1_ref(const BlockQ5_1* w, const BlockQ8_1* x, int64_t n) {
  return dot_with_min(w, x, n, [](const BlockQ5_1& b, int k) { return q5_level(b, k); });
}

float dot_q5_0_q8_0_ref(const BlockQ5_0* w, const BlockQ8_0* x, int64_t n) {
  float acc[8] = {};
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float d = fp16_to_f32(w[b].d) * fp16_to_f32(x[b].d);
    add_block_lanes([&](int k) { return q5_level(w[b], k) - 16; }, x[b].qs, d, acc);
  }
  return hsum8(acc);
}

float dot_iq4_nl_q8_0_ref(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t n) {
  const int64_t nb = n / kQK8_0;
  float acc[2][8] = {};
  int64_t b = 0;
  for (; b < nb - nb % 2; ++b) {
    const float d = fp16_to_f32(x[b].d) * fp16_to_f32(w[b].d);
    add_block_lanes([&](int k) { return int32_t{kIQ4NLValues[nibble_level(w[b].qs, k)]}; }, x[b].qs, d, acc[b % 2]);
  }
  float sum8[8];
  for (int l = 0; l < 8; ++l) sum8[l] = acc[0][l] + acc[1][l];
  float sum = hsum8(sum8);
  if (b < nb) {  // the last block of an odd count: its whole integer sum fused once
    int32_t isum = 0;
    for (int k = 0; k < kQK8_0; ++k) isum += int32_t{kIQ4NLValues[nibble_level(w[b].qs, k)]} * int32_t{x[b].qs[k]};
    sum = std::fma(fp16_to_f32(x[b].d) * fp16_to_f32(w[b].d), static_cast<float>(isum), sum);
  }
  return sum;
}

void quantize_row_q8_1_ref(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    const auto [d, id] = ref::q8_block_scale(xb);
    y[b].d = f32_to_fp16(d);
    int32_t sum = 0;
    for (int j = 0; j < kQK8_0; ++j) {
      y[b].qs[j] = static_cast<int8_t>(std::nearbyintf(xb[j] * id));  // half to even, as the SIMD rounding
      sum += y[b].qs[j];
    }
    // s uses the f32 d (before its fp16 rounding), as ggml does.
    y[b].s = f32_to_fp16(d * static_cast<float>(sum));
  }
}

}  // namespace glacier::kernels
