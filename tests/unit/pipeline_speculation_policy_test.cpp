// The per-step speculation policy: no drafts once decode groups are full, draft length following the
// measured acceptance (short at first, up to draft_max when drafts are accepted, down when rejected),
// and a sequence that never accepts drafting only an occasional probe token.
#include <gtest/gtest.h>

#include <cmath>

#include "pipeline/speculation_policy.h"

namespace {

using namespace glacier::pipeline;

constexpr int32_t kDraftMax = 8;
constexpr int32_t kFewSequences = 1;

// Verifications until a decision turns to `verdict`, each with `accepted` drafts kept of a full draft
// (rejected = the draft was not all accepted); -1 if not within `limit`.
int verifications_until(DraftAcceptance& seq, int32_t accepted, DraftVerdict verdict, int32_t length, int limit) {
  for (int i = 0; i < limit; ++i) {
    const DraftDecision d = decide_draft(kFewSequences, kDraftMax, seq);
    if (d.verdict == verdict && (verdict != DraftVerdict::Draft || d.max_tokens == length)) return i;
    if (d.verdict != DraftVerdict::Draft) continue;
    const int32_t kept = std::min(accepted, d.max_tokens);
    seq.record(kept, kept < d.max_tokens);
  }
  return -1;
}

TEST(SpeculationPolicy, FullDecodeGroupsStopDraftingWhateverTheAcceptance) {
  DraftAcceptance seq;
  for (int i = 0; i < 10; ++i) seq.record(kDraftMax, false);  // every draft accepted
  EXPECT_EQ(decide_draft(kMaxDraftingSequencesPerGroup, kDraftMax, seq).verdict, DraftVerdict::RingFull);
  EXPECT_EQ(decide_draft(4 * kMaxDraftingSequencesPerGroup, kDraftMax, seq).verdict, DraftVerdict::RingFull);
  const DraftDecision below = decide_draft(kMaxDraftingSequencesPerGroup - 1, kDraftMax, seq);
  EXPECT_EQ(below.verdict, DraftVerdict::Draft);
  EXPECT_EQ(below.max_tokens, kDraftMax);
}

TEST(SpeculationPolicy, DraftLengthIsTheLastTokenThatStillPays) {
  for (double rate : {0.1, 0.2, 0.35, 0.5, 0.7, 0.8, 0.9}) {
    const int32_t k = paying_draft_length(rate, 100);
    ASSERT_GE(k, 1) << rate;
    // The k-th token saves a step with probability rate^k, at least the payoff; one more would not.
    EXPECT_GE(std::pow(rate, k), kMinDraftPayoff * (1 - 1e-9)) << rate;
    EXPECT_LT(std::pow(rate, k + 1), kMinDraftPayoff) << rate;
    EXPECT_LE(paying_draft_length(rate, 2), 2) << "draft_max bounds it";
  }
  EXPECT_EQ(paying_draft_length(1.0, kDraftMax), kDraftMax);
  EXPECT_EQ(paying_draft_length(0.05, kDraftMax), 0) << "not even one token pays";
  EXPECT_EQ(paying_draft_length(0.9, 0), 0) << "speculation off";
}

TEST(SpeculationPolicy, NewSequenceStartsShortAndGrowsToDraftMaxWhenAccepted) {
  DraftAcceptance seq;
  const DraftDecision first = decide_draft(kFewSequences, kDraftMax, seq);
  ASSERT_EQ(first.verdict, DraftVerdict::Draft);
  EXPECT_GE(first.max_tokens, 1);
  EXPECT_LT(first.max_tokens, kDraftMax) << "no evidence yet: a short draft";
  // Every draft accepted: full length within a few verifications.
  const int n = verifications_until(seq, kDraftMax, DraftVerdict::Draft, kDraftMax, 10);
  EXPECT_GE(n, 1);
  EXPECT_LE(n, 4);
}

TEST(SpeculationPolicy, NewSequenceThatNeverAcceptsStopsSoon) {
  DraftAcceptance seq;
  const int stopped = verifications_until(seq, 0, DraftVerdict::LowAcceptance, 0, 20);
  ASSERT_GE(stopped, 1);
  EXPECT_LE(stopped, 6) << "a handful of rejected drafts is enough evidence";
}

TEST(SpeculationPolicy, RejectedDraftsShortenThenStopThenProbe) {
  DraftAcceptance seq;
  for (int i = 0; i < 10; ++i) seq.record(kDraftMax, false);
  ASSERT_EQ(decide_draft(kFewSequences, kDraftMax, seq).max_tokens, kDraftMax);
  // Half of each draft kept: shorter drafts than draft_max, but still drafts.
  const int32_t half_length = paying_draft_length(0.5, kDraftMax);
  ASSERT_LT(half_length, kDraftMax);
  const int half = verifications_until(seq, 1, DraftVerdict::Draft, half_length, 20);
  EXPECT_GE(half, 1) << "the length that pays at one token in two accepted";
  // Nothing accepted any more: the good record is forgotten within about ten verifications.
  const int stopped = verifications_until(seq, 0, DraftVerdict::LowAcceptance, 0, 20);
  ASSERT_GE(stopped, 1);
  EXPECT_LE(stopped, 12);
  // Stopped: one single-token probe every kLowAcceptanceProbeInterval decode steps, counting the step
  // that stopped it above.
  int probes = 0;
  for (int step = 1; step < 3 * kLowAcceptanceProbeInterval; ++step) {
    const DraftDecision d = decide_draft(kFewSequences, kDraftMax, seq);
    if (d.verdict != DraftVerdict::Draft) continue;
    EXPECT_EQ(d.max_tokens, 1);
    EXPECT_EQ((step + 1) % kLowAcceptanceProbeInterval, 0) << step;
    ++probes;
    seq.record(0, true);
  }
  EXPECT_EQ(probes, 3);
  // A probe that is accepted (the output started repeating) brings drafting back.
  while (decide_draft(kFewSequences, kDraftMax, seq).verdict != DraftVerdict::Draft) {}
  for (int i = 0; i < 3; ++i) seq.record(1, false);
  EXPECT_EQ(decide_draft(kFewSequences, kDraftMax, seq).verdict, DraftVerdict::Draft);
}

}  // namespace
