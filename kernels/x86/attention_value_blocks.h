// The order in which the SIMD attention variants take the weighted values: heads four at a time while
// there are four (each value row read serves all of them), then two, then one; per head group, blocks of
// kChains / H dimensions (kChains vector accumulators in registers), the dimensions past the last block
// one at a time. A block's arithmetic is the variant's own; this order changes no result.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/attention.h"

namespace glacier::kernels::x86 {

// block(dims, heads, h0, d) computes dimensions [d, d + dims) of heads [h0, h0 + heads), with dims and
// heads passed as std::integral_constant.
template <int kChains, class Block>
inline void for_each_value_block(const AttentionArgs& a, Block&& block) {
  auto heads = [&](auto h_tag, int32_t h0) {
    constexpr int H = decltype(h_tag)::value, kDims = kChains / H;
    int32_t d = 0;
    for (; d + kDims <= a.hd; d += kDims) block(std::integral_constant<int, kDims>{}, h_tag, h0, d);
    for (; d < a.hd; ++d) block(std::integral_constant<int, 1>{}, h_tag, h0, d);
  };
  int32_t h = 0;
  for (; h + 4 <= a.n_q; h += 4) heads(std::integral_constant<int, 4>{}, h);
  for (; h + 2 <= a.n_q; h += 2) heads(std::integral_constant<int, 2>{}, h);
  for (; h < a.n_q; ++h) heads(std::integral_constant<int, 1>{}, h);
}

}  // namespace glacier::kernels::x86
