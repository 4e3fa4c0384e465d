// What the scalar reference twins of the block dots share: the tree that sums ggml-cpu's eight float
// lanes at the end of a dot, and the scale of one 32-element Q8 activation block.
#pragma once
#include <cmath>

#include "kernels/quant_blocks.h"

namespace glacier::kernels::ref {

// Lanes (l + 4) + l, then (0 + 2) + (1 + 3): the order of ggml-cpu's x86 hsum_float_8.
inline float hsum8(const float (&acc)[8]) {
  float t4[4];
  for (int l = 0; l < 4; ++l) t4[l] = acc[4 + l] + acc[l];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

// A Q8_0/Q8_1 activation block's scale d (stored as fp16) and the multiplier its values are rounded with.
struct Q8BlockScale {
  float d;
  float multiplier;
};
inline Q8BlockScale q8_block_scale(const float* xb) {
  float amax = 0.0f;
  for (int j = 0; j < kQK8_0; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
  return {amax / 127.0f, q8_multiplier(amax)};
}

}  // namespace glacier::kernels::ref
