// --decode-groups auto between waves (DecodeGroupRetuner): hand-computed re-choices as the live count of
// decoding sequences halves and doubles, and no flapping when it wobbles between the thresholds.
#include <gtest/gtest.h>

#include <stdexcept>

#include "common/planning_shapes.h"
#include "planning/decode_group_retune.h"

namespace {

using glacier::planning::DecodeGroupInputs;
using glacier::planning::DecodeGroupRetune;
using glacier::planning::DecodeGroupRetuner;
using glacier::testing::hop_bound_pair;

// One recorded re-choice: at `at_live` live sequences, from `from` groups to `to`.
void expect_retune(const DecodeGroupRetune& got, int at_live, int from, int to) {
  EXPECT_EQ(got.at_live, at_live);
  EXPECT_EQ(got.from, from);
  EXPECT_EQ(got.to, to);
}

TEST(DecodeGroupRetune, KeepsTheStartUpChoiceUntilTheLiveCountHalves) {
  DecodeGroupRetuner r(hop_bound_pair(), 4);
  EXPECT_EQ(r.groups_for(16), 4);
  EXPECT_EQ(r.groups_for(12), 4);
  EXPECT_EQ(r.groups_for(9), 4);  // 9 is more than half of 16
  EXPECT_TRUE(r.retunes().empty());
  EXPECT_EQ(r.groups_for(8), 8);
  ASSERT_EQ(r.retunes().size(), 1u);
  expect_retune(r.retunes()[0], 8, 4, 8);
}

TEST(DecodeGroupRetune, FollowsTheTailDownAndTheNextWaveUp) {
  DecodeGroupRetuner r(hop_bound_pair(), 4);
  EXPECT_EQ(r.groups_for(8), 8);
  EXPECT_EQ(r.groups_for(4), 4);
  EXPECT_EQ(r.groups_for(2), 2);
  EXPECT_EQ(r.groups_for(3), 2);   // less than double 2
  EXPECT_EQ(r.groups_for(4), 4);   // doubled: re-chosen for 4
  EXPECT_EQ(r.groups_for(16), 4);  // doubled twice over: re-chosen for 16, the same 4, not recorded
  ASSERT_EQ(r.retunes().size(), 4u);
  expect_retune(r.retunes()[1], 4, 8, 4);
  expect_retune(r.retunes()[2], 2, 4, 2);
  expect_retune(r.retunes()[3], 4, 2, 4);
}

TEST(DecodeGroupRetune, AWobblingCountDoesNotFlap) {
  DecodeGroupRetuner r(hop_bound_pair(), 4);
  EXPECT_EQ(r.groups_for(8), 8);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(r.groups_for(9), 8);
    EXPECT_EQ(r.groups_for(7), 8);
    EXPECT_EQ(r.groups_for(15), 8);
    EXPECT_EQ(r.groups_for(5), 8);
  }
  EXPECT_EQ(r.retunes().size(), 1u);
}

TEST(DecodeGroupRetune, NothingDecodingKeepsTheChoice) {
  DecodeGroupRetuner r(hop_bound_pair(), 4);
  EXPECT_EQ(r.groups_for(0), 4);
  EXPECT_TRUE(r.retunes().empty());
}

TEST(DecodeGroupRetune, RefusesInputsTheRuleRefuses) {
  DecodeGroupInputs in = hop_bound_pair();
  in.stages.pop_back();
  EXPECT_THROW(DecodeGroupRetuner(in, 4), std::invalid_argument);
  EXPECT_THROW(DecodeGroupRetuner(hop_bound_pair(), 0), std::invalid_argument);
}

}  // namespace
