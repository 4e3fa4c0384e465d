// Prompt-lookup drafting: which occurrence is chosen (longest suffix first, then the latest), how the
// draft is cut at max_draft, how a repetition continues past the history's end, and when nothing is drafted.
#include <gtest/gtest.h>

#include <vector>

#include "pipeline/prompt_lookup.h"

namespace {

using glacier::pipeline::lookup_draft;
using V = std::vector<int32_t>;

V draft_of(const V& history, int32_t max_draft, int32_t max_ngram = glacier::pipeline::kLookupMaxNgram) {
  V d;
  const int32_t n = lookup_draft(history, max_draft, d, max_ngram);
  EXPECT_EQ(n, static_cast<int32_t>(d.size()));
  return d;
}

TEST(PromptLookup, ProposesWhatFollowedTheLastTrigram) {
  // ... 5 6 7 8 9 ... 5 6 7: the trigram 5 6 7 was followed by 8 9 10 11.
  EXPECT_EQ(draft_of({1, 5, 6, 7, 8, 9, 10, 11, 2, 3, 5, 6, 7}, 4), (V{8, 9, 10, 11}));
  EXPECT_EQ(draft_of({1, 5, 6, 7, 8, 9, 10, 11, 2, 3, 5, 6, 7}, 2), (V{8, 9}));
}

TEST(PromptLookup, PrefersTheLongerSuffixOverALaterShorterOne) {
  // The bigram 6 7 occurs latest at index 5 (followed by 30), but the trigram 5 6 7 only at 1 (followed by 20).
  EXPECT_EQ(draft_of({0, 5, 6, 7, 20, 6, 7, 30, 5, 6, 7}, 1), (V{20}));
  // With bigrams at most, the latest bigram wins.
  EXPECT_EQ(draft_of({0, 5, 6, 7, 20, 6, 7, 30, 5, 6, 7}, 1, 2), (V{30}));
}

TEST(PromptLookup, PrefersTheLatestOccurrenceOfTheSameLength) {
  EXPECT_EQ(draft_of({4, 9, 1, 4, 9, 2, 0, 4, 9}, 1), (V{2}));
}

TEST(PromptLookup, FallsBackToASingleToken) {
  EXPECT_EQ(draft_of({3, 8, 11, 12, 13, 40, 8}, 3), (V{11, 12, 13}));
}

TEST(PromptLookup, ContinuesARepetitionPastTheHistory) {
  // Period 3 (a b c a b c a b): the match of "c a b" at index 2 leaves two known tokens, then repeats.
  EXPECT_EQ(draft_of({1, 2, 3, 1, 2, 3, 1, 2}, 5), (V{3, 1, 2, 3, 1}));
  // A run of one token drafts more of it.
  EXPECT_EQ(draft_of({9, 7, 7, 7}, 4), (V{7, 7, 7, 7}));
}

TEST(PromptLookup, DraftsNothingWithoutAnEarlierOccurrence) {
  EXPECT_TRUE(draft_of({1, 2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(draft_of({1}, 4).empty());
  EXPECT_TRUE(draft_of({}, 4).empty());
  EXPECT_TRUE(draft_of({1, 2, 1, 2}, 0).empty());
}

TEST(PromptLookup, ClearsAnEarlierDraft) {
  V d = {99, 98};
  EXPECT_EQ(lookup_draft(V{1, 2, 3}, 4, d), 0);
  EXPECT_TRUE(d.empty());
}

}  // namespace
