// The scheduler's prefix index: longest common prefix over the slots' rows, limits, copies and
// truncation, and which free slot's rows are given up first (eviction: rows held twice, then the
// least recently used).
#include <gtest/gtest.h>

#include <vector>

#include "pipeline/prefix_index.h"
#include "util/error.h"

namespace {

using glacier::pipeline::common_prefix;
using glacier::pipeline::PrefixIndex;
using Tokens = std::vector<int32_t>;

TEST(PrefixIndex, CommonPrefixStopsAtTheFirstDifferenceAndAtTheLimit) {
  const Tokens a = {1, 2, 3, 4, 5}, b = {1, 2, 3, 9, 5};
  EXPECT_EQ(common_prefix(a, b, 100), 3);
  EXPECT_EQ(common_prefix(a, b, 2), 2);
  EXPECT_EQ(common_prefix(a, Tokens{1, 2}, 100), 2);  // the shorter one ends it
  EXPECT_EQ(common_prefix(a, Tokens{}, 100), 0);
  EXPECT_EQ(common_prefix(a, a, 0), 0);
}

TEST(PrefixIndex, FindsTheLongestPrefixAmongTheCandidateSlotsOnly) {
  PrefixIndex index(4);
  index.append(0, Tokens{1, 2, 3});
  index.append(1, Tokens{1, 2, 3, 4, 5, 6});
  index.append(2, Tokens{1, 2, 3, 4, 7});
  const Tokens prompt = {1, 2, 3, 4, 5, 8};
  const std::vector<int32_t> all = {0, 1, 2, 3};
  EXPECT_EQ(index.longest(prompt, 100, all).slot, 1);
  EXPECT_EQ(index.longest(prompt, 100, all).length, 5);
  // Slot 1 not offered: slot 2 shares four tokens.
  const std::vector<int32_t> without_1 = {0, 2, 3};
  EXPECT_EQ(index.longest(prompt, 100, without_1).slot, 2);
  EXPECT_EQ(index.longest(prompt, 100, without_1).length, 4);
  // The limit caps the length (a prompt keeps its last token to compute).
  EXPECT_EQ(index.longest(prompt, 3, all).length, 3);
  // Nothing in common: no slot.
  EXPECT_EQ(index.longest(Tokens{9, 9}, 100, all).slot, -1);
  EXPECT_EQ(index.longest(Tokens{9, 9}, 100, all).length, 0);
}

TEST(PrefixIndex, EqualMatchesPreferTheMostRecentlyUsedSlot) {
  PrefixIndex index(3);
  index.append(0, Tokens{4, 5, 6});
  index.append(2, Tokens{4, 5, 7});
  index.touch(2);
  index.touch(0);
  const std::vector<int32_t> all = {0, 1, 2};
  EXPECT_EQ(index.longest(Tokens{4, 5, 9}, 100, all).slot, 0);
  index.touch(2);
  EXPECT_EQ(index.longest(Tokens{4, 5, 9}, 100, all).slot, 2);
}

TEST(PrefixIndex, TruncationAndCopiesKeepOnlyTheRowsASlotHolds) {
  PrefixIndex index(2);
  index.append(0, Tokens{1, 2, 3, 4});
  index.truncate(0, 2);
  EXPECT_EQ(index.tokens(0), (Tokens{1, 2}));
  index.truncate(0, 5);  // never grows
  EXPECT_EQ(index.length(0), 2);
  index.append(0, Tokens{7});
  index.append(1, Tokens{9, 9, 9, 9, 9});
  index.copy_prefix(0, 1, 2);  // the destination's later rows are stale: dropped
  EXPECT_EQ(index.tokens(1), (Tokens{1, 2}));
  EXPECT_EQ(index.tokens(0), (Tokens{1, 2, 7}));
  EXPECT_THROW(index.copy_prefix(0, 1, 4), glacier::InternalError);  // more rows than slot 0 holds
}

TEST(PrefixIndex, EvictsAnEmptySlotFirstThenTheLeastRecentlyUsed) {
  PrefixIndex index(4);
  for (int32_t s = 0; s < 4; ++s) {
    index.append(s, Tokens{s + 1, 10});
    index.touch(s);
  }
  index.touch(0);  // slot 1 is now the least recently used
  EXPECT_EQ(index.victim(std::vector<int32_t>{0, 1, 2, 3}), 1);
  EXPECT_EQ(index.victim(std::vector<int32_t>{0, 2, 3}), 2);
  index.truncate(3, 0);  // holds nothing: taken before any slot with rows
  EXPECT_EQ(index.victim(std::vector<int32_t>{0, 1, 2, 3}), 3);
}

TEST(PrefixIndex, EvictsRowsAnotherSlotAlsoHoldsBeforeTheOnlyCopyOfAPrefix) {
  PrefixIndex index(3);
  index.append(0, Tokens{1, 2, 3, 4, 5});  // preamble 1 2 3, then its own question
  index.append(1, Tokens{1, 2, 3, 6, 7});  // the same preamble, another question
  index.append(2, Tokens{8, 9, 10, 11, 12});
  index.touch(2);  // the least recently used, but the only slot with its prefix
  index.touch(0);
  index.touch(1);
  // Slots 0 and 1 keep two rows of their own each; the older of them goes.
  EXPECT_EQ(index.victim(std::vector<int32_t>{0, 1, 2}), 0);
  EXPECT_EQ(index.victim(std::vector<int32_t>{1, 2}), 1);
  // Slot 0 emptied: slot 1 now holds the only copy of its preamble, and slot 2 is the older.
  index.truncate(0, 0);
  EXPECT_EQ(index.victim(std::vector<int32_t>{1, 2}), 2);
}

}  // namespace
