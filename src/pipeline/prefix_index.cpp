// Prefix index: a plain scan over the slots. A job has tens to a few hundred slots and a comparison
// stops at the first differing token, so an admission costs far less than one micro-batch; a trie would
// save nothing measurable and would need its nodes kept in step with every truncation.
#include "pipeline/prefix_index.h"

#include <algorithm>

#include "util/error.h"

namespace glacier::pipeline {

int32_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b, int32_t limit) {
  const size_t n = std::min({a.size(), b.size(), static_cast<size_t>(std::max(limit, 0))});
  const auto diff = std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin());
  return static_cast<int32_t>(diff.first - a.begin());
}

PrefixIndex::PrefixIndex(int32_t n_slots) : slots_(static_cast<size_t>(std::max(n_slots, 0))) {}

void PrefixIndex::truncate(int32_t slot, int32_t n) {
  std::vector<int32_t>& t = slots_.at(static_cast<size_t>(slot)).tokens;
  if (n < static_cast<int32_t>(t.size())) t.resize(static_cast<size_t>(std::max(n, 0)));
}

void PrefixIndex::append(int32_t slot, std::span<const int32_t> tokens) {
  std::vector<int32_t>& t = slots_.at(static_cast<size_t>(slot)).tokens;
  t.insert(t.end(), tokens.begin(), tokens.end());
}

void PrefixIndex::copy_prefix(int32_t src, int32_t dst, int32_t n) {
  const std::vector<int32_t>& s = slots_.at(static_cast<size_t>(src)).tokens;
  GLACIER_ASSERT(n >= 0 && n <= static_cast<int32_t>(s.size()), "a slot copy of rows its source holds");
  if (src == dst) return truncate(dst, n);
  slots_.at(static_cast<size_t>(dst)).tokens.assign(s.begin(), s.begin() + n);
  touch(src);
  touch(dst);
}

void PrefixIndex::touch(int32_t slot) { slots_.at(static_cast<size_t>(slot)).last_used = ++clock_; }

PrefixIndex::Match PrefixIndex::longest(std::span<const int32_t> prompt, int32_t limit,
                                        std::span<const int32_t> candidates) const {
  Match best;
  uint64_t best_used = 0;
  for (int32_t slot : candidates) {
    const Slot& s = slots_.at(static_cast<size_t>(slot));
    const int32_t n = common_prefix(prompt, s.tokens, limit);
    if (n == 0) continue;
    if (n > best.length || (n == best.length && s.last_used > best_used)) {
      best = {slot, n};
      best_used = s.last_used;
    }
  }
  return best;
}

std::vector<int32_t> PrefixIndex::unique_lengths() const {
  // The longest prefix a slot shares with any other is the one it shares with a neighbour in sorted
  // order, so one sort finds them all.
  std::vector<int32_t> order(slots_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return slots_[static_cast<size_t>(a)].tokens < slots_[static_cast<size_t>(b)].tokens;
  });
  std::vector<int32_t> shared(slots_.size(), 0);
  for (size_t i = 1; i < order.size(); ++i) {
    const auto a = static_cast<size_t>(order[i - 1]), b = static_cast<size_t>(order[i]);
    const int32_t n = common_prefix(slots_[a].tokens, slots_[b].tokens, length(order[i]));
    shared[a] = std::max(shared[a], n);
    shared[b] = std::max(shared[b], n);
  }
  std::vector<int32_t> unique(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) unique[i] = static_cast<int32_t>(slots_[i].tokens.size()) - shared[i];
  return unique;
}

int32_t PrefixIndex::victim(std::span<const int32_t> candidates) const {
  GLACIER_ASSERT(!candidates.empty(), "a free slot to evict");
  const std::vector<int32_t> unique = unique_lengths();
  int32_t best = candidates.front();
  for (int32_t slot : candidates) {
    const auto s = static_cast<size_t>(slot), b = static_cast<size_t>(best);
    if (unique[s] != unique[b] ? unique[s] < unique[b] : slots_[s].last_used < slots_[b].last_used) best = slot;
  }
  return best;
}

}  // namespace glacier::pipeline
