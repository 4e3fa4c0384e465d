// The layer planner (plan_partition): hand-checkable splits for stages of unequal speed and memory, the
// byte-balanced split (its equal-speed case) against every possible split, and refusals when no split fits.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "planning/partition.h"
#include "util/error.h"

namespace {

using glacier::InputError;
using glacier::planning::format_layer_split;
using glacier::planning::partition_by_bytes;
using glacier::planning::PartitionCosts;
using glacier::planning::plan_partition;

constexpr uint64_t kNoLimit = UINT64_MAX / 2;  // a cap no sum of the tests' figures reaches

// L layers of one unit of work and `layer_mem` bytes each, stages of the given speeds, no fixed work
// or memory, no memory limit.
PartitionCosts uniform(int layers, const std::vector<double>& seconds_per_work, uint64_t layer_mem = 1) {
  PartitionCosts c;
  const size_t P = seconds_per_work.size();
  c.layer_work.assign(static_cast<size_t>(layers), 1.0);
  c.layer_memory.assign(static_cast<size_t>(layers), layer_mem);
  c.stage_seconds_per_work = seconds_per_work;
  c.stage_fixed_work.assign(P, 0.0);
  c.stage_fixed_memory.assign(P, 0);
  c.stage_memory_cap.assign(P, kNoLimit);
  return c;
}

TEST(PartitionPlan, SlowStageGetsFewerLayers) {
  // 4 layers, stage 1 three times slower: 3+1 gives max(3, 3) = 3; 2+2 gives max(2, 6) = 6.
  const auto plan = plan_partition(uniform(4, {1.0, 3.0}));
  EXPECT_EQ(format_layer_split(plan.split), "0:3,3:4");
  EXPECT_EQ(plan.stage_time, (std::vector<double>{3.0, 3.0}));
  EXPECT_EQ(plan.bottleneck(), 3.0);
}

TEST(PartitionPlan, FixedWorkCountsForItsStage) {
  // Equal speeds, the last stage also runs a head worth 2 layers: 3 + (1+2) beats 2 + (2+2).
  PartitionCosts c = uniform(4, {1.0, 1.0});
  c.stage_fixed_work = {0.0, 2.0};
  const auto plan = plan_partition(c);
  EXPECT_EQ(format_layer_split(plan.split), "0:3,3:4");
  EXPECT_EQ(plan.stage_time, (std::vector<double>{3.0, 3.0}));
}

TEST(PartitionPlan, TiesGoToEarlierCuts) {
  // Six layers over speeds 1, 2, 1: the best slowest stage is 3 (the middle stage takes one layer, the
  // others 2 and 3 in either order); ties keep the earlier cut, so the first stage takes 2.
  const auto plan = plan_partition(uniform(6, {1.0, 2.0, 1.0}));
  EXPECT_EQ(format_layer_split(plan.split), "0:2,2:3,3:6");
  EXPECT_EQ(plan.stage_time, (std::vector<double>{2.0, 2.0, 3.0}));
}

TEST(PartitionPlan, MemoryCapForbidsALayerCount) {
  // The fast stage would take 3 of 4 layers, but its memory (fixed 5 + 10 a layer, cap 25) holds only 2:
  // the best split within memory is 2+2, the slow stage then takes 6.
  PartitionCosts c = uniform(4, {1.0, 3.0}, 10);
  c.stage_fixed_memory = {5, 5};
  c.stage_memory_cap = {25, kNoLimit};
  const auto plan = plan_partition(c);
  EXPECT_EQ(format_layer_split(plan.split), "0:2,2:4");
  EXPECT_EQ(plan.stage_time, (std::vector<double>{2.0, 6.0}));
  EXPECT_EQ(plan.stage_memory, (std::vector<uint64_t>{25, 25}));
  c.stage_memory_cap = {35, kNoLimit};  // one more layer's memory: the unconstrained optimum fits
  EXPECT_EQ(format_layer_split(plan_partition(c).split), "0:3,3:4");
}

TEST(PartitionPlan, MemoryProportionalSplitAsSpeedsOfOneOverCapacity) {
  // --partition memory: work = memory, seconds per work = 1 / cap, so the split minimizes the largest
  // need/available. A stage with twice the memory takes twice the layers.
  PartitionCosts c = uniform(6, {1.0 / 200.0, 1.0 / 100.0}, 10);
  c.layer_work.assign(6, 10.0);
  c.stage_memory_cap = {200, 100};
  const auto plan = plan_partition(c);
  EXPECT_EQ(format_layer_split(plan.split), "0:4,4:6");
  EXPECT_DOUBLE_EQ(plan.bottleneck(), 0.2);
}

// The heaviest stage (its layers' bytes, the head on the last) of the best split, by trying every one.
uint64_t best_bottleneck_by_trying_all(const glacier::model::WeightBytes& b, int P) {
  const int L = static_cast<int>(b.per_layer.size());
  uint64_t best = std::numeric_limits<uint64_t>::max();
  // Cut masks over the L - 1 boundaries with exactly P - 1 cuts.
  for (uint32_t mask = 0; mask < (1u << (L - 1)); ++mask) {
    if (__builtin_popcount(mask) != P - 1) continue;
    uint64_t heaviest = 0, stage = 0;
    for (int l = 0; l < L; ++l) {
      stage += b.per_layer[static_cast<size_t>(l)];
      if (l == L - 1 || (mask >> l & 1u)) {
        if (l == L - 1) stage += b.head;
        heaviest = std::max(heaviest, stage);
        stage = 0;
      }
    }
    best = std::min(best, heaviest);
  }
  return best;
}

TEST(PartitionByBytes, TheHeaviestStageIsAsLightAsAnySplitMakesIt) {
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 200; ++trial) {
    const int L = 1 + static_cast<int>(rng() % 12);
    const int P = 1 + static_cast<int>(rng() % L);
    glacier::model::WeightBytes b;
    for (int l = 0; l < L; ++l) b.per_layer.push_back(1000 + rng() % 4000);
    b.head = rng() % 6000;
    const auto split = partition_by_bytes(b, P);
    ASSERT_EQ(static_cast<int>(split.size()), P);
    uint64_t heaviest = 0;
    for (int s = 0; s < P; ++s) {
      uint64_t bytes = s == P - 1 ? b.head : 0;
      for (int l = split[static_cast<size_t>(s)].first; l < split[static_cast<size_t>(s)].last; ++l)
        bytes += b.per_layer[static_cast<size_t>(l)];
      heaviest = std::max(heaviest, bytes);
    }
    EXPECT_EQ(heaviest, best_bottleneck_by_trying_all(b, P))
        << "trial " << trial << ": " << L << " layers over " << P << " stages, split " << format_layer_split(split);
  }
  // By hand: 4, 1, 1, 4 over two stages with a head of 2: the cut before the last layer (6, and 4 + 2).
  glacier::model::WeightBytes hand;
  hand.per_layer = {4, 1, 1, 4};
  hand.head = 2;
  EXPECT_EQ(format_layer_split(partition_by_bytes(hand, 2)), "0:3,3:4");
}

TEST(PartitionPlan, NoSplitWithinMemoryIsRefusedWithWhatEachStageHolds) {
  // Layers of 10 bytes; stage 0 holds 1 of them, stage 1 holds 2: 4 layers cannot be placed.
  PartitionCosts c = uniform(4, {1.0, 1.0}, 10);
  c.stage_memory_cap = {15, 25};
  try {
    plan_partition(c);
    FAIL() << "expected a refusal";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "no contiguous split of the 4 layers over 2 stages fits every stage's memory; the most layers each "
                 "stage's memory holds: 1, 2");
  }
  // A stage whose fixed part alone exceeds its cap holds no layer at all.
  c.stage_memory_cap = {kNoLimit, 25};
  c.stage_fixed_memory = {0, 30};
  EXPECT_THROW(plan_partition(c), InputError);
}

TEST(PartitionPlan, MoreStagesThanLayersIsRefused) {
  EXPECT_THROW(plan_partition(uniform(2, {1.0, 1.0, 1.0})), InputError);
}

}  // namespace
