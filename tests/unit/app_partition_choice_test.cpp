// Where the planner's inputs come from: per-rank speeds from an earlier run's trace (hand-made figures),
// per-stage figures over replicas, the speed and memory splits on a small model, and the refusals of
// --partition-from that name the file.
#include <gtest/gtest.h>

#include "app/trace_speeds.h"
#include "common/planning_shapes.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"
#include "io/hdf5_trace.h"
#include "planning/partition_choice.h"
#include "util/error.h"

namespace {

using glacier::InputError;
using glacier::app::EarlierRun;
using glacier::planning::MemoryShape;
using glacier::app::speeds_from_trace;
using glacier::io::TracePhase;
using glacier::planning::format_layer_split;

constexpr uint64_t kRoomy = uint64_t{1} << 40;  // a memory cap none of these tiny models comes near

using glacier::testing::four_layer_model;

// An earlier run on 2 ranks with split 0:2,2:4: rank 0 held 20 bytes of work, rank 1 20 + the head's 20.
// Rank 0 computed 100 tokens in 2 s, rank 1 the same tokens in 12 s; other phases do not count.
EarlierRun two_rank_run() {
  EarlierRun run;
  run.layer_split = "0:2,2:4";
  run.ranks = 2;
  run.rows = {{0, 0, TracePhase::Compute, 0.0, 1.5, 60, 0}, {0, 1, TracePhase::Compute, 2.0, 2.5, 40, 0},
              {0, 0, TracePhase::Wait, 2.5, 9.0, 0, 0},     {1, 0, TracePhase::Recv, 1.5, 1.6, 60, 4096},
              {1, 0, TracePhase::Compute, 1.6, 8.6, 60, 0}, {1, 1, TracePhase::Compute, 8.6, 13.6, 40, 0}};
  return run;
}

TEST(PartitionChoice, TraceSpeedsAreComputeSecondsPerWorkPerToken) {
  const auto speeds = speeds_from_trace("old.h5", two_rank_run(), four_layer_model().bytes, 2);
  ASSERT_EQ(speeds.size(), 2u);
  EXPECT_DOUBLE_EQ(speeds[0], 2.0 / (20.0 * 100.0));
  EXPECT_DOUBLE_EQ(speeds[1], 12.0 / (40.0 * 100.0));
}

TEST(PartitionChoice, SpeedSplitMovesLayersOffTheSlowStage) {
  // Rank 1 three times slower per byte: 3+1 layers predict max(30, 3 x (10 + 20)) = 90, against 120 for 2+2.
  const MemoryShape s = four_layer_model();
  const auto plan = glacier::planning::speed_partition(s, {1.0, 3.0}, {kRoomy, kRoomy});
  EXPECT_EQ(format_layer_split(plan.split), "0:3,3:4");
  EXPECT_EQ(plan.stage_time, (std::vector<double>{30.0, 90.0}));
  EXPECT_EQ(glacier::planning::predicted_stage_times(s.bytes, {{0, 2}, {2, 4}}, {1.0, 3.0}), (std::vector<double>{20.0, 120.0}));
}

TEST(PartitionChoice, MemorySplitFollowsTheRanksMemory) {
  const MemoryShape s = four_layer_model();
  const auto m = glacier::planning::stage_memory_model(s, 2);
  // Stage 1 may use as much as its fixed part plus one layer: the roomy stage 0 takes the other three.
  const auto plan = glacier::planning::memory_partition(s, {kRoomy, m.stage_fixed[1] + m.per_layer[3]});
  EXPECT_EQ(format_layer_split(plan.split), "0:3,3:4");
  EXPECT_THROW(glacier::planning::memory_partition(s, {m.stage_fixed[0] + m.per_layer[0], m.stage_fixed[1] + m.per_layer[3]}),
               InputError)
      << "two stages of one layer each cannot hold four layers";
}

TEST(PartitionChoice, AStageIsAsSlowAsItsSlowestReplicaAndAsTightAsItsTightest) {
  // World ranks 0..3 as two replicas of two stages: stage 0 = ranks 0 and 2, stage 1 = ranks 1 and 3.
  EXPECT_EQ(glacier::planning::slowest_per_stage({1.0, 3.0, 2.0, 1.0}, 2), (std::vector<double>{2.0, 3.0}));
  EXPECT_EQ(glacier::planning::tightest_per_stage({5, 4, 3, 6}, 2), (std::vector<uint64_t>{3, 4}));
}

TEST(PartitionChoice, TraceOfAnotherRankCountOrModelOrWithoutComputeIsRefused) {
  const auto bytes = four_layer_model().bytes;
  auto message = [&](const EarlierRun& run, int world) {
    try {
      speeds_from_trace("old.h5", run, bytes, world);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message(two_rank_run(), 3),
            "option --partition-from old.h5: expected a run on the same 3 ranks as this job (speeds belong to ranks), "
            "found a run on 2");
  EarlierRun other = two_rank_run();
  other.layer_split = "0:3,3:5";
  EXPECT_EQ(message(other, 2),
            "option --partition-from old.h5: expected a layer_split of this model's 4 layers over a divisor of 2 "
            "ranks, found '0:3,3:5' (a run of another model?)");
  EarlierRun idle = two_rank_run();
  idle.rows.resize(3);  // rank 1's rows gone
  EXPECT_EQ(message(idle, 2),
            "option --partition-from old.h5: expected compute intervals of rank 1 in /trace, found none (did its "
            "replica get no work?)");
}

TEST(PartitionChoice, EarlierRunIsReadFromAResultsFileAndAMissingTraceIsNamed) {
  const std::string dir = glacier::testing::scratch_dir("partition_from");
  const std::string path = dir + "/old.h5";
  {
    glacier::io::ResultsFile results(path, glacier::io::ResultsFile::Mode::Create);
    results.set_attribute("layer_split", std::string("0:2,2:4"));
    results.set_attribute("ranks", int64_t{2});
  }
  try {
    glacier::app::read_earlier_run(path);
    ADD_FAILURE() << "expected a refusal: the file has no trace yet";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("option --partition-from " + path + ": trace file " + path +
                                              ": expected a group /trace, found none", 0),
              0u)
        << e.what();
  }
  glacier::io::write_trace(path, two_rank_run().rows);
  const EarlierRun run = glacier::app::read_earlier_run(path);
  EXPECT_EQ(run.layer_split, "0:2,2:4");
  EXPECT_EQ(run.ranks, 2);
  EXPECT_EQ(speeds_from_trace(path, run, four_layer_model().bytes, 2),
            speeds_from_trace(path, two_rank_run(), four_layer_model().bytes, 2));

  const std::string bare = dir + "/bare.h5";
  glacier::io::write_trace(bare, two_rank_run().rows);  // a trace without the run's attributes
  EXPECT_THROW(glacier::app::read_earlier_run(bare), InputError);
}

}  // namespace
