// The job's layout decisions on hand-made figures: each host's memory, the split by hand, by bytes and
// by memory, --replicas auto and given, a shard set's fixed split, and the refusals (ranks that do not
// divide, more stages than layers, a model that does not fit, options a shard set cannot honour).
#include <gtest/gtest.h>

#include "common/input_error.h"
#include "common/planning_shapes.h"
#include "compute/kv_cache.h"
#include "planning/layout.h"
#include "planning/partition.h"
#include "util/error.h"

namespace {

using glacier::InputError;
using glacier::model::LayerRange;
using glacier::planning::format_layer_split;
using namespace glacier::planning;

using glacier::testing::kGiB;
using glacier::testing::refusal_message;
using glacier::testing::kMiB;

// Eight layers of 1 GiB (the last two of 2 GiB), a 256 MiB embedding and head; KV and buffers are a
// few MiB at most, so a rank's need is its weights to within kSmall.
constexpr uint64_t kSmall = 64 * kMiB;
MemoryShape uneven_model() {
  return glacier::testing::eight_layer_model({kGiB, kGiB, kGiB, kGiB, kGiB, kGiB, 2 * kGiB, 2 * kGiB});
}

// `ranks` ranks, each alone on a host far larger than the model.
HostMemory roomy(int ranks) {
  HostMemory m;
  for (int r = 0; r < ranks; ++r) {
    std::string host = "h";  // += : GCC 12 warns falsely on "h" + std::to_string(r)
    host += std::to_string(r);
    m.hosts.push_back(host);
    m.available.push_back(1024 * kGiB);
  }
  return m;
}

TEST(PlanningLayout, EachRankGetsTheSmallestBudgetItsHostReported) {
  const HostMemory m = host_memory({"a", "b", "a", "c", "a"}, {6 * kGiB, 5 * kGiB, 4 * kGiB, 7 * kGiB, 9 * kGiB});
  EXPECT_EQ(m.hosts, (std::vector<std::string>{"a", "b", "a", "c", "a"}));
  EXPECT_EQ(m.available, (std::vector<uint64_t>{4 * kGiB, 5 * kGiB, 4 * kGiB, 7 * kGiB, 4 * kGiB}));
}

TEST(PlanningLayout, TheShapeCountsAtLeastOneSlotAGroup) {
  const MemoryShape given = memory_shape({}, {}, 64, 8, /*slots_option=*/5, /*decode_groups_option=*/0);
  EXPECT_EQ(given.min_slots, 5);
  EXPECT_EQ(memory_shape({}, {}, 64, 8, 0, 0).min_slots, 1) << "no --slots: one sequence is the least a stage runs";
  EXPECT_EQ(memory_shape({}, {}, 64, 8, 0, 12).min_slots, 12) << "each of 12 decode groups needs a sequence";
  EXPECT_EQ(memory_shape({}, {}, 64, 8, 0, -1).min_slots, 1) << "auto (negative) asks for no slot";
  EXPECT_EQ(memory_shape({}, {}, 64, 8, 0, -1).decode_groups, -1);
}

TEST(PlanningLayout, ByHandTheSplitIsTheOneGiven) {
  SplitRequest req;
  req.layers = {{0, 1}, {1, 8}};
  EXPECT_EQ(format_layer_split(layer_split(req, uneven_model(), 2, roomy(2))), "0:1,1:8");
  EXPECT_THROW(layer_split(req, uneven_model(), 3, roomy(3)), InputError) << "two ranges for three stages";
}

TEST(PlanningLayout, ByBytesTheHeaviestStageIsAsLightAsCanBe) {
  // 10.25 GiB of work (the head's 0.25 on the last stage): a cut after layer k leaves k GiB and
  // 10.25 - k GiB for k <= 6, so k = 5 (5 and 5.25 GiB) beats k = 6 (6 and 4.25) and k = 4 (4 and 6.25).
  EXPECT_EQ(format_layer_split(layer_split({}, uneven_model(), 2, roomy(2))), "0:5,5:8");
}

TEST(PlanningLayout, ByMemoryARankWithLessMemoryHoldsLess) {
  SplitRequest req;
  req.partition = Partition::Memory;
  // Rank 0 has 4 GiB, rank 1 12 GiB; the fullest stage is as empty as can be. Cut after 2 layers:
  // 2.25 / 4 = 56% and 8.25 / 12 = 69%; after 3: 3.25 / 4 = 81%; after 1: 1.25 / 4 and 9.25 / 12 = 77%.
  const HostMemory mem = host_memory({"small", "big"}, {4 * kGiB, 12 * kGiB});
  EXPECT_EQ(format_layer_split(layer_split(req, uneven_model(), 2, mem)), "0:2,2:8");
  // No split keeps both within 1 GiB: the byte-balanced split stands in (plan_layout then refuses it).
  const HostMemory tiny = host_memory({"a", "b"}, {kGiB, kGiB});
  EXPECT_EQ(format_layer_split(layer_split(req, uneven_model(), 2, tiny)), "0:5,5:8");
}

TEST(PlanningLayout, MoreStagesThanLayersIsRefused) {
  SplitRequest req;
  req.replicas = 1;
  EXPECT_THROW(plan_layout(req, "m.gguf", uneven_model(), roomy(9), 9), InputError);
  req.partition = Partition::Memory;
  EXPECT_THROW(plan_layout(req, "m.gguf", uneven_model(), roomy(9), 9), InputError);
}

TEST(PlanningLayout, ReplicasMustDivideTheRanks) {
  SplitRequest req;
  req.replicas = 3;
  try {
    plan_layout(req, "m.gguf", uneven_model(), roomy(4), 4);
    FAIL() << "3 replicas of 4 ranks were accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "option --replicas: expected a divisor of the 4 ranks in the job, found 3");
  }
}

TEST(PlanningLayout, GivenReplicasSplitTheRanksIntoPipelines) {
  SplitRequest req;
  req.replicas = 2;
  const Layout l = plan_layout(req, "m.gguf", uneven_model(), roomy(6), 6);
  EXPECT_EQ(l.replicas, 2);
  EXPECT_EQ(l.n_stages, 3);
  EXPECT_EQ(l.split.size(), 3u);
  // World ranks 0 1 2 | 3 4 5: rank 4 is replica 1's stage 1.
  EXPECT_EQ(l.replica_of(4), 1);
  EXPECT_EQ(l.stage_of(4), 1);
  EXPECT_EQ(l.replica_of(2), 0);
  EXPECT_EQ(l.stage_of(2), 2);
}

TEST(PlanningLayout, AutoReplicasTakeTheShortestPipelineThatFits) {
  const MemoryShape shape = uneven_model();  // 10.5 GiB of weights in all
  // Four hosts of 20 GiB: the whole model fits one rank, so four pipelines of one stage.
  const HostMemory big = host_memory({"a", "b", "c", "d"}, std::vector<uint64_t>(4, 20 * kGiB));
  EXPECT_EQ(auto_replicas({}, "m.gguf", shape, big, 4), 4);
  // Hosts of 5 GiB: two stages of 5.25 GiB each (0:5 with the embedding, 5:8 with the head) do not fit,
  // three do not divide four ranks, four (at most 3.25 GiB a stage) do: one pipeline of four stages.
  const HostMemory five = host_memory({"a", "b", "c", "d"}, std::vector<uint64_t>(4, 5 * kGiB));
  EXPECT_EQ(auto_replicas({}, "m.gguf", shape, five, 4), 1);
  EXPECT_EQ(plan_layout({}, "m.gguf", shape, five, 4).n_stages, 4);
  // Hosts of 8 GiB: the two stages of 5.25 GiB fit: two pipelines of two.
  const HostMemory eight = host_memory({"a", "b", "c", "d"}, std::vector<uint64_t>(4, 8 * kGiB));
  const Layout l = plan_layout({}, "m.gguf", shape, eight, 4);
  EXPECT_EQ(l.replicas, 2);
  EXPECT_EQ(l.n_stages, 2);
  EXPECT_EQ(format_layer_split(l.split), "0:5,5:8");
  // Nothing fits 1 GiB hosts: auto falls back to one pipeline, which plan_layout refuses.
  const HostMemory one = host_memory({"a", "b", "c", "d"}, std::vector<uint64_t>(4, kGiB));
  EXPECT_EQ(auto_replicas({}, "m.gguf", shape, one, 4), 1);
}

TEST(PlanningLayout, AModelThatDoesNotFitIsRefusedWithTheHostNamed) {
  // Both ranks on one host of 8 GiB, whose stages (0:5, 5:8) need 5.25 GiB each.
  SplitRequest req;
  req.replicas = 1;
  try {
    plan_layout(req, "m.gguf", uneven_model(), host_memory({"node1", "node1"}, {8 * kGiB, 8 * kGiB}), 2);
    FAIL() << "a model of 10.5 GiB was placed on a host of 8 GiB";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("m.gguf: the model does not fit in memory: host node1 runs 2 ranks (layers 0:5,5:8)"),
              std::string::npos)
        << what;
  }
}

TEST(PlanningLayout, AFixedSplitSetsTheReplicas) {
  const std::vector<LayerRange> fixed = {{0, 4}, {4, 8}};
  SplitRequest req;
  req.partition = Partition::Memory;  // ignored: the fixed split wins (check_fixed_split_options refuses it earlier)
  const Layout l = plan_layout(req, "set", uneven_model(), roomy(6), 6, fixed);
  EXPECT_EQ(l.replicas, 3);
  EXPECT_EQ(l.n_stages, 2);
  EXPECT_EQ(format_layer_split(l.split), "0:4,4:8");
}

TEST(PlanningLayout, AShardSetRefusesTheOptionsThatWouldChooseItsSplit) {
  const auto message = [](const SplitRequest& req, const std::string& from, int world) {
    return refusal_message([&] { check_fixed_split_options(req, from, "dir", 2, world); });
  };
  EXPECT_EQ(message({}, "", 4), "") << "4 ranks over 2 stages, nothing else asked: accepted";
  EXPECT_EQ(message({{}, Partition::Bytes, 2}, "", 4), "") << "--replicas 2 is what 4 ranks over 2 stages make";
  EXPECT_EQ(message({}, "", 3),
            "option --model dir (a shard set of 2 stages): expected a rank count that is a multiple of its stages, "
            "found 3 ranks");
  EXPECT_EQ(message({{}, Partition::Bytes, 1}, "", 4),
            "option --replicas: expected 2 or auto (4 ranks over the 2 stages of dir), found 1");
  const std::string fixed_split = "options --layers / --partition / --partition-from: expected none with --model dir "
                                  "(a shard set of 2 stages), whose split is fixed when it is cut (glacier_shard), "
                                  "found them given";
  // Under --expert-parallel 2 the ring has half the job's ranks; the messages count the job's.
  const auto with_experts = [](const SplitRequest& req, int ring) {
    return refusal_message([&] { check_fixed_split_options(req, "", "dir", 2, ring, 2); });
  };
  EXPECT_EQ(with_experts({}, 2), "") << "4 ranks: 2 stages x --expert-parallel 2";
  EXPECT_EQ(with_experts({}, 1),
            "option --model dir (a shard set of 2 stages): expected a rank count that is a multiple of its stages x "
            "--expert-parallel (2 x 2), found 2 ranks");
  EXPECT_EQ(with_experts({{}, Partition::Bytes, 1}, 4),
            "option --replicas: expected 2 or auto (8 ranks over --expert-parallel 2 and the 2 stages of dir), found 1");
  EXPECT_EQ(message({{{0, 4}, {4, 8}}, Partition::Bytes, 0}, "", 2), fixed_split);
  EXPECT_EQ(message({{}, Partition::Memory, 0}, "", 2), fixed_split);
  EXPECT_EQ(message({}, "old.h5", 2), fixed_split);
}

TEST(PlanningLayout, StageFillIsNeedOverTheStagesShareOfItsHost) {
  const MemoryShape shape = uneven_model();
  const std::vector<LayerRange> split = {{0, 6}, {6, 8}};
  // Stage 0's ranks (0 and 2) share host a with each other: 16 GiB / 2; stage 1's (1 and 3) have b and c
  // alone, c the tighter at 5 GiB.
  const HostMemory mem = host_memory({"a", "b", "a", "c"}, {16 * kGiB, 32 * kGiB, 16 * kGiB, 5 * kGiB});
  const StageFill f = stage_fill(shape, split, mem);
  ASSERT_EQ(f.percent.size(), 2u);
  // Stage 0 holds 6.25 GiB of weights of its 8, stage 1 4.25 GiB of its 5 (plus at most kSmall each).
  EXPECT_GE(f.percent[0], 100.0 * 6.25 / 8);
  EXPECT_LE(f.percent[0], 100.0 * (6.25 * kGiB + kSmall) / (8 * kGiB));
  EXPECT_GE(f.percent[1], 100.0 * 4.25 / 5);
  EXPECT_LE(f.percent[1], 100.0 * (4.25 * kGiB + kSmall) / (5 * kGiB));
  EXPECT_TRUE(f.within);
  const StageFill tight = stage_fill(shape, split, host_memory({"a", "b", "a", "c"}, {16 * kGiB, 32 * kGiB, 16 * kGiB, 4 * kGiB}));
  EXPECT_FALSE(tight.within) << "stage 1 needs over 4.25 GiB on a 4 GiB host";
}

TEST(PlanningLayout, DefaultSlotsAreWhatHalfTheBudgetHolds) {
  glacier::model::ModelConfig cfg = uneven_model().cfg;
  const uint64_t per_slot = glacier::compute::KvCache::bytes_needed(cfg, 3, 1, 128);
  EXPECT_EQ(default_slots(cfg, {0, 3}, 128, 2 * 5 * per_slot + 1), 5);
  EXPECT_EQ(default_slots(cfg, {0, 3}, 128, 2 * 5 * per_slot - 1), 4);
  EXPECT_EQ(default_slots(cfg, {0, 3}, 128, 0), 1) << "at least one slot";
  EXPECT_EQ(default_slots(cfg, {0, 3}, 128, 1024 * kGiB), kDefaultSlots) << "at most kDefaultSlots";
  // A stage of no layers is sized as one of one layer (never a division by zero).
  EXPECT_EQ(default_slots(cfg, {2, 2}, 128, 2 * 7 * glacier::compute::KvCache::bytes_needed(cfg, 1, 1, 128)), 7);
}

}  // namespace
