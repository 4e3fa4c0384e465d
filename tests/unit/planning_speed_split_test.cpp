// --partition measured's decision on hand-made speeds: the slowest rank sets its stage's speed, the
// split balances predicted stage times (a slower stage holds less), honours every stage's memory cap,
// and reports rather than throws when no split fits.
#include <gtest/gtest.h>

#include "common/planning_shapes.h"
#include "planning/partition.h"
#include "planning/speed_split.h"

namespace {

using glacier::planning::format_layer_split;
using namespace glacier::planning;

constexpr uint64_t kRoomy = uint64_t{1} << 40;  // a memory cap none of these tiny models comes near
// The planner multiplies speeds by integral work: these products of small integers are exact.
constexpr double kExact = 0.0;

// Four layers of 10 weight bytes and a head of 20 (work on the last stage).
using glacier::testing::four_layer_model;

TEST(PlanningSpeedSplit, EqualRanksBalanceLayersAgainstTheHead) {
  // Cut after k layers: 10k and 10(4 - k) + 20; k = 3 gives 30 and 30.
  const SpeedSplit s = plan_speed_split(four_layer_model(), {1.0, 1.0}, 2, {"a", "b"}, {kRoomy, kRoomy});
  ASSERT_TRUE(s.plan.has_value()) << s.no_split;
  EXPECT_EQ(format_layer_split(s.plan->split), "0:3,3:4");
  EXPECT_NEAR(s.plan->stage_time[0], 30.0, kExact);
  EXPECT_NEAR(s.plan->stage_time[1], 30.0, kExact);
}

TEST(PlanningSpeedSplit, AThreeTimesSlowerFirstStageHoldsOneLayer) {
  // Stage 0 at 3 s per unit: k = 1 gives 30 and 50, k = 2 gives 60 and 40: the slowest stage is fastest at k = 1.
  const SpeedSplit s = plan_speed_split(four_layer_model(), {3.0, 1.0}, 2, {"a", "b"}, {kRoomy, kRoomy});
  ASSERT_TRUE(s.plan.has_value()) << s.no_split;
  EXPECT_EQ(format_layer_split(s.plan->split), "0:1,1:4");
  EXPECT_NEAR(s.plan->bottleneck(), 50.0, kExact);
}

TEST(PlanningSpeedSplit, AStageIsAsSlowAsItsSlowestReplica) {
  // Four ranks, two replicas of two stages: ranks 0 and 2 run stage 0, and rank 2 is the slow one.
  const SpeedSplit s =
      plan_speed_split(four_layer_model(), {1.0, 1.0, 3.0, 1.0}, 2, {"a", "b", "c", "d"}, std::vector<uint64_t>(4, kRoomy));
  EXPECT_EQ(s.stage_speeds, (std::vector<double>{3.0, 1.0}));
  ASSERT_TRUE(s.plan.has_value()) << s.no_split;
  EXPECT_EQ(format_layer_split(s.plan->split), "0:1,1:4");
}

TEST(PlanningSpeedSplit, TheFastSplitGivesWayToAStagesMemoryCap) {
  const MemoryShape shape = four_layer_model();
  // Stage 1 (alone on host b) can hold the last two layers and no more: 0:1,1:4 is out, and of the
  // rest k = 2 (60 and 40) beats k = 3 (90 and 30).
  const uint64_t two_layers = rank_memory_need(shape, {2, 4}, false, true, 2).total();
  const SpeedSplit s = plan_speed_split(shape, {3.0, 1.0}, 2, {"a", "b"}, {kRoomy, two_layers});
  ASSERT_TRUE(s.plan.has_value()) << s.no_split;
  EXPECT_EQ(format_layer_split(s.plan->split), "0:2,2:4");
  EXPECT_NEAR(s.plan->bottleneck(), 60.0, kExact);
}

TEST(PlanningSpeedSplit, NoSplitWithinTheCapsIsReportedNotThrown) {
  const SpeedSplit s = plan_speed_split(four_layer_model(), {1.0, 1.0}, 2, {"a", "b"}, {1, 1});
  EXPECT_FALSE(s.plan.has_value());
  EXPECT_FALSE(s.no_split.empty());
  EXPECT_EQ(s.stage_speeds, (std::vector<double>{1.0, 1.0}));
}

TEST(PlanningSpeedSplit, MoreStagesThanLayersIsReported) {
  const SpeedSplit s = plan_speed_split(four_layer_model(), std::vector<double>(5, 1.0), 5,
                                        {"a", "b", "c", "d", "e"}, std::vector<uint64_t>(5, kRoomy));
  EXPECT_FALSE(s.plan.has_value());
  EXPECT_FALSE(s.no_split.empty());
}

}  // namespace
