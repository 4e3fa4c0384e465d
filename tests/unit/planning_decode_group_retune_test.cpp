// --decode-groups auto between waves (DecodeGroupRetuner): hand-computed re-choices as the live count of
// decoding sequences halves and doubles, and no flapping when it wobbles between the thresholds.
#include <gtest/gtest.h>

#include <stdexcept>

#include "planning/decode_group_retune.h"

namespace {

using glacier::planning::DecodeGroupInputs;
using glacier::planning::DecodeGroupRetuner;
using glacier::planning::StageStepCosts;

// Two stages whose step takes b units for b rows, a hop of 4 units, 16 slots, up to 8 groups. A round
// at G groups of b = ceil(live / G) rows is max(2b + 2 x 4, formed x b):
//   live 16: G=2 24, G=3 20, G=4..8 16          -> 4 groups (the start-up choice)
//   live 8:  G=2 16, G=3 14, G=4..7 12, G=8 10  -> 8
//   live 4:  G=2 12, G=3 12, G=4 10             -> 4 (at most live groups)
//   live 2:  one row a group at the fewest, 2   -> 2
DecodeGroupInputs hop_bound_pair() {
  DecodeGroupInputs in;
  in.n_stages = 2;
  in.slots = 16;
  in.max_groups = 8;
  in.hop_seconds = 4.0;
  in.stages.assign(2, StageStepCosts{{1, 2}, {1.0, 2.0}});
  return in;
}

TEST(DecodeGroupRetune, KeepsTheStartUpChoiceUntilTheLiveCountHalves) {
  DecodeGroupRetuner r(hop_bound_pair(), 4);
  EXPECT_EQ(r.groups_for(16), 4);
  EXPECT_EQ(r.groups_for(12), 4);
  EXPECT_EQ(r.groups_for(9), 4);  // 9 is more than half of 16
  EXPECT_TRUE(r.retunes().empty());
  EXPECT_EQ(r.groups_for(8), 8);
  ASSERT_EQ(r.retunes().size(), 1u);
  EXPECT_EQ(r.retunes()[0].at_live, 8);
  EXPECT_EQ(r.retunes()[0].from, 4);
  EXPECT_EQ(r.retunes()[0].to, 8);
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
  EXPECT_EQ(r.retunes()[1].at_live, 4);
  EXPECT_EQ(r.retunes()[1].from, 8);
  EXPECT_EQ(r.retunes()[1].to, 4);
  EXPECT_EQ(r.retunes()[2].at_live, 2);
  EXPECT_EQ(r.retunes()[2].to, 2);
  EXPECT_EQ(r.retunes()[3].at_live, 4);
  EXPECT_EQ(r.retunes()[3].from, 2);
  EXPECT_EQ(r.retunes()[3].to, 4);
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
