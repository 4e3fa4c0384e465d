// --decode-groups' decisions on hand-made figures: an explicit count, auto's reasons not to time, its
// bound and the rows it times, its choice from step times whose answer is worked out by hand, the
// re-tuner it hands on, and the record in the log line and the results attribute.
#include <gtest/gtest.h>

#include "planning/decode_group_plan.h"

namespace {

using glacier::planning::StageStepCosts;
using namespace glacier::planning;

// The choice's predicted times go through a least-squares line of exact measurements: a few ulps.
constexpr double kSecondsTolerance = 1e-12;

DecodeGroupRequest automatic(const std::string& mode = "generate") { return {true, 0, mode == "generate", mode}; }

TEST(PlanningDecodeGroups, AnExplicitCountIsTakenAsGiven) {
  const DecodeGroupStart five = start_decode_group_plan({false, 5, true, "generate"}, 3, 32);
  EXPECT_FALSE(five.to_time);
  EXPECT_EQ(five.plan.groups, 5);
  EXPECT_EQ(five.plan.rule, "--decode-groups 5");
  const DecodeGroupStart zero = start_decode_group_plan({false, 0, true, "generate"}, 3, 32);
  EXPECT_EQ(zero.plan.groups, 3) << "0 is one group a stage";
  EXPECT_EQ(zero.plan.rule, "--decode-groups 0");
  EXPECT_EQ(zero.plan.describe(), "3 decode groups (--decode-groups 0)");
  EXPECT_EQ(zero.plan.to_json().dump(), R"({"groups":3,"rule":"--decode-groups 0"})");
  EXPECT_FALSE(make_retuner(zero.plan).has_value()) << "an explicit count never re-tunes";
}

TEST(PlanningDecodeGroups, AutoTimesNothingOnOneStageOrWithoutDecodeSteps) {
  const DecodeGroupStart one = start_decode_group_plan(automatic(), 1, 32);
  EXPECT_FALSE(one.to_time);
  EXPECT_EQ(one.plan.groups, 1);
  EXPECT_EQ(one.plan.rule, "auto: one stage computes each micro-batch as it is submitted");
  const DecodeGroupStart score = start_decode_group_plan(automatic("score"), 4, 32);
  EXPECT_FALSE(score.to_time);
  EXPECT_EQ(score.plan.groups, 4);
  EXPECT_EQ(score.plan.rule, "auto: --mode score has no decode steps");
  EXPECT_FALSE(make_retuner(score.plan).has_value());
}

TEST(PlanningDecodeGroups, AutoIsBoundByTheInFlightMicroBatchesAndTheSlots) {
  const DecodeGroupStart many = start_decode_group_plan(automatic(), 3, 32);
  EXPECT_TRUE(many.to_time);
  EXPECT_EQ(many.plan.max_groups, 6) << "two micro-batches a stage are in flight";
  EXPECT_EQ(many.plan.groups, 3) << "one a stage until the timings choose";
  EXPECT_EQ(start_decode_group_plan(automatic(), 3, 4).plan.max_groups, 4) << "no more groups than slots";
}

TEST(PlanningDecodeGroups, TheTimedRowsAreOneGroupAStageAtMost) {
  EXPECT_EQ(largest_timed_rows(32, 3, 512), 11);  // ceil(32 / 3)
  EXPECT_EQ(largest_timed_rows(32, 3, 8), 8) << "no more than a micro-batch holds";
  EXPECT_EQ(largest_timed_rows(1, 4, 512), 1);
  EXPECT_EQ(rows_to_time(11), (std::vector<int32_t>{1, 2, 4, 8, 11}));
  EXPECT_EQ(rows_to_time(8), (std::vector<int32_t>{1, 2, 4, 8}));
  EXPECT_EQ(rows_to_time(1), (std::vector<int32_t>{1}));
}

// Two stages whose decode step costs 1 ms a row, a hop of 10 ms, 8 slots, at most 4 groups. A round
// (every sequence gains a token) lasts max(trip, groups x step): 2 groups of 4 rows take
// max(4 + 4 + 2 x 10, 8) = 28 ms, 3 of 3 max(26, 9) = 26 ms, 4 of 2 max(24, 8) = 24 ms: auto takes 4,
// at 24 / 8 = 3 ms a token against 28 / 8 = 3.5 ms at one group a stage.
TEST(PlanningDecodeGroups, AutoChoosesFromTheTimingsAsWorkedOutByHand) {
  DecodeGroupStart start = start_decode_group_plan(automatic(), 2, 8);
  ASSERT_TRUE(start.to_time);
  ASSERT_EQ(start.plan.max_groups, 4);
  const StageStepCosts per_row{{1, 2, 4}, {1e-3, 2e-3, 4e-3}};
  choose_from_timings(start.plan, 10e-3, {per_row, per_row});
  const DecodeGroupPlan& plan = start.plan;
  ASSERT_TRUE(plan.measured());
  EXPECT_EQ(plan.groups, 4);
  EXPECT_NEAR(plan.choice.seconds_per_token, 3e-3, kSecondsTolerance);
  EXPECT_NEAR(plan.choice.default_seconds_per_token, 3.5e-3, kSecondsTolerance);
  EXPECT_EQ(plan.largest_rows(), 4);
  EXPECT_EQ(plan.describe(),
            "4 decode groups (auto, of 2 to 4: 8 slots, hop 10 ms, decode step of 4 rows by stage (line) 4, 4 ms; "
            "predicted 3 ms a token, 3.5 at one group a stage)");
  const nlohmann::json j = plan.to_json();
  EXPECT_EQ(j["groups"], 4);
  EXPECT_EQ(j["rule"], "auto");
  EXPECT_EQ(j["slots"], 8);
  EXPECT_EQ(j["max_groups"], 4);
  EXPECT_NEAR(j["hop_ms"].get<double>(), 10.0, kSecondsTolerance * 1e3);
  ASSERT_EQ(j["stage_step"].size(), 2u);
  EXPECT_EQ(j["stage_step"][1]["rows"], (std::vector<int32_t>{1, 2, 4}));
  EXPECT_NEAR(j["stage_step"][1]["ms"][2].get<double>(), 4.0, kSecondsTolerance * 1e3);

  std::optional<glacier::planning::DecodeGroupRetuner> retuner = make_retuner(plan);
  ASSERT_TRUE(retuner.has_value()) << "auto that measured re-tunes between waves";
  EXPECT_EQ(retuner->groups(), 4) << "starting from the start-up choice";
  const nlohmann::json none = with_retunes(plan, {}, {});
  EXPECT_EQ(none["retunes"], nlohmann::json::array());
  EXPECT_EQ(none["trials"], nlohmann::json::array());
  const nlohmann::json two = with_retunes(plan, {{3, 4, 2}, {3, 2, 3, true, 100.0, 150.0}}, {{2, 100.0}, {3, 150.0}});
  EXPECT_EQ(two["retunes"].dump(),
            R"([{"at_live":3,"from":4,"to":2,"why":"live"},)"
            R"({"at_live":3,"from":2,"from_steps_per_s":100.0,"to":3,"to_steps_per_s":150.0,"why":"measured"}])");
  EXPECT_EQ(two["trials"].dump(), R"([{"groups":2,"steps_per_s":100.0},{"groups":3,"steps_per_s":150.0}])");
  EXPECT_EQ(two["groups"], 4);
}

// A slow hop no longer pays for more groups when the step itself dominates: steps of 10 ms a row and
// a hop of 0.1 ms give 2 groups max(80 + 0.2, 80) = 80.2 ms and 4 groups max(40.2, 80) = 80 ms, a gain
// under kDecodeGroupsNearBest: auto stays at one group a stage.
TEST(PlanningDecodeGroups, AutoKeepsOneGroupAStageWhenMoreGainLittle) {
  DecodeGroupStart start = start_decode_group_plan(automatic(), 2, 8);
  const StageStepCosts slow{{1, 2, 4}, {10e-3, 20e-3, 40e-3}};
  choose_from_timings(start.plan, 0.1e-3, {slow, slow});
  EXPECT_EQ(start.plan.groups, 2);
}

}  // namespace
