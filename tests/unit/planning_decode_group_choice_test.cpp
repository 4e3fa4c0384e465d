// --decode-groups auto's rule (choose_decode_groups): hand-computed rounds of the decode model for hops of
// zero, moderate and long, a slot bound, a memory bound, weight-bound (flat) steps and a slow stage.
#include <gtest/gtest.h>

#include <stdexcept>

#include "planning/decode_group_choice.h"

namespace {

using glacier::planning::choose_decode_groups;
using glacier::planning::DecodeGroupInputs;
using glacier::planning::linear_fit;
using glacier::planning::predicted_seconds_per_token;
using glacier::planning::StageStepCosts;

constexpr double kMs = 1e-3;
// The figures below are sums of a few milliseconds: equal to this in doubles' rounding.
constexpr double kRoundingSeconds = 1e-12;

// t(b) = fixed + per_row x b milliseconds, measured at 1 and 64 rows (so exact at every b in between).
StageStepCosts linear_ms(double fixed, double per_row) {
  return {{1, 64}, {(fixed + per_row) * kMs, (fixed + 64 * per_row) * kMs}};
}

DecodeGroupInputs ring(int32_t stages, int32_t slots, double hop_ms, const StageStepCosts& each, int32_t max_groups = 64) {
  DecodeGroupInputs in;
  in.n_stages = stages;
  in.slots = slots;
  in.max_groups = max_groups;
  in.hop_seconds = hop_ms * kMs;
  in.stages.assign(static_cast<size_t>(stages), each);
  return in;
}

// choose_decode_groups(in) picks `groups`, predicting a round of `round_ms` that carries in.slots tokens
// (seconds per token = round / slots, to doubles' rounding); a failure names the caller's line. Returns
// the choice for what else a test checks.
glacier::planning::DecodeGroupChoice expect_choice(const DecodeGroupInputs& in, int32_t groups, double round_ms,
                                                   const char* caller_file = __builtin_FILE(),
                                                   int caller_line = __builtin_LINE()) {
  const ::testing::ScopedTrace trace(caller_file, caller_line, "expect_choice");
  const auto choice = choose_decode_groups(in);
  EXPECT_EQ(choice.groups, groups);
  EXPECT_NEAR(choice.seconds_per_token, round_ms * kMs / in.slots, kRoundingSeconds);
  return choice;
}

TEST(DecodeGroupChoice, StepCostsInterpolateLinearlyAndExtendTheLastSegment) {
  const StageStepCosts c{{1, 4, 16}, {1.0, 2.0, 5.0}};
  EXPECT_DOUBLE_EQ(c.at(0), 1.0);
  EXPECT_DOUBLE_EQ(c.at(1), 1.0);
  EXPECT_DOUBLE_EQ(c.at(2), 1.0 + 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(c.at(10), 2.0 + 3.0 * 6.0 / 12.0);
  EXPECT_DOUBLE_EQ(c.at(32), 5.0 + 3.0 * 16.0 / 12.0);
  const StageStepCosts one{{8}, {3.0}};
  EXPECT_DOUBLE_EQ(one.at(1), 3.0);
  EXPECT_DOUBLE_EQ(one.at(64), 3.0);
}

TEST(DecodeGroupChoice, LinearFitRecoversALineAndKeepsItsTermsNonNegative) {
  // Exactly on t = 2 + 0.5 b: the same line back.
  const StageStepCosts on_line = linear_fit({{1, 2, 4, 8}, {2.5, 3.0, 4.0, 6.0}});
  EXPECT_EQ(on_line.rows, (std::vector<int32_t>{1, 2, 4, 8}));
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(on_line.seconds[i], 2.0 + 0.5 * on_line.rows[i], 1e-12);
  // Noise that makes 4 rows look cheaper per row than 8 or 2: x = 1, 2, 4 with y = 1, 3, 2. Sums: x 7,
  // y 6, xx 21, xy 15; slope (3 x 15 - 7 x 6) / (3 x 21 - 49) = 3 / 14, fixed (6 - 1.5) / 3 = 1.5.
  const StageStepCosts noisy = linear_fit({{1, 2, 4}, {1.0, 3.0, 2.0}});
  EXPECT_NEAR(noisy.seconds[0], 1.5 + 3.0 / 14.0, 1e-12);
  EXPECT_NEAR(noisy.seconds[2], 1.5 + 4 * 3.0 / 14.0, 1e-12);
  // Falling costs: flat at their mean (2).
  const StageStepCosts falling = linear_fit({{1, 2, 4}, {3.0, 2.0, 1.0}});
  for (double t : falling.seconds) EXPECT_DOUBLE_EQ(t, 2.0);
  // A negative intercept (x 1, 2 with y 1, 4: 3b - 2): through the origin, slope xy / xx = 9 / 5.
  const StageStepCosts steep = linear_fit({{1, 2}, {1.0, 4.0}});
  EXPECT_NEAR(steep.seconds[0], 9.0 / 5.0, 1e-12);
  EXPECT_NEAR(steep.seconds[1], 18.0 / 5.0, 1e-12);
}

// t(b) = 1 + 0.1 b ms, 4 stages, 64 slots, no hop time. 4 groups of 16: t = 2.6, round max(4 x 2.6,
// 4 x 2.6) = 10.4 ms; 5 groups of 13: t = 2.3, max(9.2, 5 x 2.3) = 11.5; more groups only lengthen it
// (groups x t(64 / groups) grows with the groups). One group a stage, as without the rule.
TEST(DecodeGroupChoice, NoHopTimeKeepsOneGroupPerStage) {
  expect_choice(ring(4, 64, 0.0, linear_ms(1.0, 0.1)), 4, 10.4);
  EXPECT_NEAR(predicted_seconds_per_token(ring(4, 64, 0.0, linear_ms(1.0, 0.1)), 5), 11.5 * kMs / 64, kRoundingSeconds);
}

// The same with 10 ms a hop: a round is the trip, sum t + 40 ms, until groups x t catches up.
// 4 groups: 10.4 + 40 = 50.4; 8 (b 8, t 1.8): 47.2; 13-15 (b 5, 13 groups form, t 1.5): 46.0;
// 16 (b 4, t 1.4): 45.6; 32 (b 2, t 1.2): 44.8, the best; 64 (b 1, t 1.1): max(44.4, 70.4) = 70.4.
// The fewest within 2% of 44.8 (45.696): 16.
TEST(DecodeGroupChoice, LongHopsSplitTheSlotsIntoMoreGroups) {
  const auto in = ring(4, 64, 10.0, linear_ms(1.0, 0.1));
  const auto choice = expect_choice(in, 16, 45.6);
  EXPECT_NEAR(choice.default_seconds_per_token, 50.4 * kMs / 64, kRoundingSeconds);
  EXPECT_NEAR(predicted_seconds_per_token(in, 32), 44.8 * kMs / 64, kRoundingSeconds);
  EXPECT_NEAR(predicted_seconds_per_token(in, 64), 70.4 * kMs / 64, kRoundingSeconds);
  EXPECT_NEAR(predicted_seconds_per_token(in, 14), 46.0 * kMs / 64, kRoundingSeconds);
}

// Row-bound steps, t(b) = 0.1 + 1.0 b ms, 8 slots, 10 ms a hop: 4 groups of 2 (t 2.1): 8.4 + 40 = 48.4;
// 5-7 groups still form 4 of 2; 8 groups of 1 (t 1.1): max(4.4 + 40, 8.8) = 44.4. Never beyond the slots.
TEST(DecodeGroupChoice, GroupsStopAtTheSlots) {
  expect_choice(ring(4, 8, 10.0, linear_ms(0.1, 1.0)), 8, 44.4);
}

// Fewer slots than stages: one group a stage is all there is (each group gets a sequence or none).
TEST(DecodeGroupChoice, FewerSlotsThanStagesKeepOneGroupPerStage) {
  EXPECT_EQ(choose_decode_groups(ring(4, 2, 10.0, linear_ms(0.1, 1.0))).groups, 4);
}

// The second case capped at 8 groups (the memory check's micro-batches in flight): 4..8 groups give
// 50.4, 49.2, 48.4, 48.0, 47.2; within 2% of 47.2 (48.144) the fewest is 7.
TEST(DecodeGroupChoice, GroupsStopAtTheMemoryBound) {
  expect_choice(ring(4, 64, 10.0, linear_ms(1.0, 0.1), 8), 7, 48.0);
}

// Weight-bound steps (as long for 1 row as for 64): more groups cannot shorten the 4 x 1 + 4 x 5 = 24 ms
// trip a token takes, so they buy nothing, however long the hop.
TEST(DecodeGroupChoice, FlatStepCostsKeepOneGroupPerStage) {
  expect_choice(ring(4, 64, 5.0, linear_ms(1.0, 0.0)), 4, 24.0);
}

// Two stages, 32 slots, 4 ms a hop. Both t = 1 + 0.1 b: 7 groups (b 5, t 1.5): max(3 + 8, 7 x 1.5) =
// 11.0, the best; 6 (b 6, t 1.6): max(11.2, 9.6) = 11.2, within 2%; 5 (b 7): max(11.4, 8.5) = 11.4, not:
// 6 groups. With the second stage twice as slow (2 + 0.2 b) its compute bounds the round sooner:
// 3 groups (b 11: 2.1 and 4.2): max(6.3 + 8, 3 x 4.2) = 14.3, the best; 4 (b 8: 1.8, 3.6):
// max(13.4, 14.4) = 14.4; 2 (b 16): max(15.8, 10.4) = 15.8: 3 groups.
TEST(DecodeGroupChoice, ASlowStageBoundsTheGroups) {
  EXPECT_EQ(choose_decode_groups(ring(2, 32, 4.0, linear_ms(1.0, 0.1))).groups, 6);
  DecodeGroupInputs uneven = ring(2, 32, 4.0, linear_ms(1.0, 0.1));
  uneven.stages[1] = linear_ms(2.0, 0.2);
  expect_choice(uneven, 3, 14.3);
}

TEST(DecodeGroupChoice, OneStageHasOneGroup) {
  EXPECT_EQ(choose_decode_groups(ring(1, 64, 10.0, linear_ms(1.0, 0.1))).groups, 1);
}

TEST(DecodeGroupChoice, InconsistentInputsAreRefused) {
  DecodeGroupInputs missing = ring(4, 64, 1.0, linear_ms(1.0, 0.1));
  missing.stages.pop_back();
  EXPECT_THROW(choose_decode_groups(missing), std::invalid_argument);
  DecodeGroupInputs unsorted = ring(2, 64, 1.0, StageStepCosts{{4, 2}, {1.0, 2.0}});
  EXPECT_THROW(choose_decode_groups(unsorted), std::invalid_argument);
  DecodeGroupInputs negative = ring(2, 64, -1.0, linear_ms(1.0, 0.1));
  EXPECT_THROW(choose_decode_groups(negative), std::invalid_argument);
}

}  // namespace
