// The blocks in which the SIMD attention variants take a group's query heads: four at a time while there
// are four (each key or value row read serves all of them), then two, then one; for the weighted values,
// per head block, blocks of kChains / H dimensions (kChains vector accumulators in registers), the
// dimensions past the last block one at a time. A block's arithmetic is the variant's own; this order
// changes no result.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/attention.h"

namespace glacier::kernels::x86 {

// heads(h_tag, h0) takes heads [h0, h0 + H) of [0, n_q), with H passed as std::integral_constant.
template <class Heads>
inline void for_each_head_block(int32_t n_q, Heads&& heads) {
  int32_t h = 0;
  for (; h + 4 <= n_q; h += 4) heads(std::integral_constant<int, 4>{}, h);
  for (; h + 2 <= n_q; h += 2) heads(std::integral_constant<int, 2>{}, h);
  for (; h < n_q; ++h) heads(std::integral_constant<int, 1>{}, h);
}

// block(dims, heads, h0, d) computes dimensions [d, d + dims) of heads [h0, h0 + heads), with dims and
// heads passed as std::integral_constant.
template <int kChains, class Block>
inline void for_each_value_block(const AttentionArgs& a, Block&& block) {
  for_each_head_block(a.n_q, [&](auto h_tag, int32_t h0) {
    constexpr int H = decltype(h_tag)::value, kDims = kChains / H;
    int32_t d = 0;
    for (; d + kDims <= a.hd; d += kDims) block(std::integral_constant<int, kDims>{}, h_tag, h0, d);
    for (; d < a.hd; ++d) block(std::integral_constant<int, 1>{}, h_tag, h0, d);
  });
}

}  // namespace glacier::kernels::x86
