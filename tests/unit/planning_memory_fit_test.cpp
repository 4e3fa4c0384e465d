// The memory fit check: per-rank needs add up per host, a host that cannot hold its ranks' shards is
// refused with the smallest pipeline that would fit, and a fitting layout passes.
#include <gtest/gtest.h>

#include "common/planning_shapes.h"
#include "planning/memory_fit.h"
#include "compute/kv_cache.h"

namespace {

using glacier::planning::check_memory_fit;
using glacier::planning::MemoryShape;
using glacier::planning::rank_memory_need;
using glacier::model::LayerRange;

using glacier::testing::kGiB;
using glacier::testing::kMiB;

// Eight equal layers of 1 GiB, a 256 MiB embedding and head, a small KV and buffers.
MemoryShape eight_gib_model() {
  MemoryShape s = glacier::testing::eight_layer_model(std::vector<uint64_t>(8, kGiB));
  s.ring_bytes_per_micro_batch = 64 * 1024;  // a stand-in: the app asks the wire (pipeline::max_forward_bytes + back)
  return s;
}

TEST(MemoryFit, RankNeedCountsItsLayersEmbeddingHeadKvAndBuffers) {
  const MemoryShape s = eight_gib_model();
  const auto first = rank_memory_need(s, LayerRange{0, 3}, true, false);
  EXPECT_EQ(first.weights, 3 * kGiB + 256 * kMiB);
  EXPECT_EQ(first.kv_cache, glacier::compute::KvCache::bytes_needed(3, 1, 128, 64));
  const auto last = rank_memory_need(s, LayerRange{3, 8}, false, true);
  EXPECT_EQ(last.weights, 5 * kGiB + 256 * kMiB);
  EXPECT_GT(last.buffers, first.buffers) << "the last rank also holds a micro-batch's logits";
  EXPECT_EQ(last.total(), last.weights + last.kv_cache + last.buffers);
}

TEST(MemoryFit, FittingLayoutPasses) {
  const MemoryShape s = eight_gib_model();
  const std::vector<LayerRange> split = {{0, 4}, {4, 8}};
  EXPECT_FALSE(check_memory_fit("m.gguf", s, split, {"a", "b"}, {5 * kGiB, 5 * kGiB}).has_value());
}

TEST(MemoryFit, OvercommittedHostIsNamedWithTheRankCountThatWouldFit) {
  const MemoryShape s = eight_gib_model();
  const std::vector<LayerRange> split = {{0, 4}, {4, 8}};
  // Both ranks on one host with 6 GiB: 3 GiB a rank, so stages of at most 2 layers plus extras: 4 ranks.
  const auto error = check_memory_fit("m.gguf", s, split, {"node1", "node1"}, {6 * kGiB, 6 * kGiB});
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("m.gguf: the model does not fit in memory"), std::string::npos) << *error;
  EXPECT_NE(error->find("host node1 runs 2 ranks (layers 0:4,4:8)"), std::string::npos) << *error;
  EXPECT_NE(error->find("the host offers 6.0 GiB"), std::string::npos) << *error;
  EXPECT_NE(error->find("it would fit on 4 ranks of 3.0 GiB"), std::string::npos) << *error;
}

TEST(MemoryFit, TheTightestHostSetsTheRankSizeOfTheAdvice) {
  const MemoryShape s = eight_gib_model();
  const std::vector<LayerRange> split = {{0, 4}, {4, 8}};
  // One roomy host and one with 1.5 GiB: every rank must make do with 1.5 GiB, one layer each.
  const auto error = check_memory_fit("m.gguf", s, split, {"big", "small"}, {64 * kGiB, 3 * kGiB / 2});
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("host small runs 1 rank (layers 4:8)"), std::string::npos) << *error;
  EXPECT_NE(error->find("it would fit on 8 ranks of 1.5 GiB"), std::string::npos) << *error;
}

TEST(MemoryFit, ModelTooBigForAnySplitSaysSo) {
  const MemoryShape s = eight_gib_model();
  const auto error = check_memory_fit("m.gguf", s, {{0, 8}}, {"a"}, {512 * kMiB});
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("does not fit even with one layer a rank on ranks of 512.0 MiB"), std::string::npos) << *error;
}

TEST(MemoryFit, StageModelAddsUpToTheRankNeed) {
  const MemoryShape s = eight_gib_model();
  const auto m = glacier::planning::stage_memory_model(s, 3);
  ASSERT_EQ(m.per_layer.size(), 8u);
  ASSERT_EQ(m.stage_fixed.size(), 3u);
  for (const auto& [first, last] : std::vector<std::pair<int, int>>{{0, 3}, {3, 5}, {5, 8}, {2, 7}})
    for (int stage = 0; stage < 3; ++stage) {
      uint64_t sum = m.stage_fixed[static_cast<size_t>(stage)];
      for (int l = first; l < last; ++l) sum += m.per_layer[static_cast<size_t>(l)];
      EXPECT_EQ(sum, rank_memory_need(s, LayerRange{first, last}, stage == 0, stage == 2, 3).total())
          << "stage " << stage << " layers " << first << ":" << last;
    }
}

// The driver (first stage of a pipeline of several) holds a send and a return buffer for each micro-batch in
// flight: 2 a stage, or --decode-groups when more. The other stages and a single stage hold none.
TEST(MemoryFit, DecodeGroupsCostTheDriverItsInFlightBuffers) {
  MemoryShape s = eight_gib_model();
  EXPECT_EQ(glacier::planning::micro_batches_in_flight(0, 1), 1);
  EXPECT_EQ(glacier::planning::micro_batches_in_flight(0, 3), 6);
  EXPECT_EQ(glacier::planning::micro_batches_in_flight(100, 3), 100);
  const uint64_t alone = rank_memory_need(s, LayerRange{0, 8}, true, true, 1).buffers;
  const uint64_t driver = rank_memory_need(s, LayerRange{0, 3}, true, false, 3).buffers;
  const uint64_t middle = rank_memory_need(s, LayerRange{3, 5}, false, false, 3).buffers;
  s.decode_groups = 100;
  EXPECT_EQ(rank_memory_need(s, LayerRange{0, 8}, true, true, 1).buffers, alone);
  EXPECT_EQ(rank_memory_need(s, LayerRange{3, 5}, false, false, 3).buffers, middle);
  EXPECT_EQ(rank_memory_need(s, LayerRange{0, 3}, true, false, 3).buffers - driver, (100 - 6) * s.ring_bytes_per_micro_batch);
  EXPECT_EQ(driver - middle, 6 * s.ring_bytes_per_micro_batch);
}

TEST(MemoryFit, RanksShareTheirHostsMemoryEqually) {
  EXPECT_EQ(glacier::planning::rank_memory_caps({"a", "b", "a", "a"}, {6 * kGiB, 5 * kGiB, 6 * kGiB, 6 * kGiB}),
            (std::vector<uint64_t>{2 * kGiB, 5 * kGiB, 2 * kGiB, 2 * kGiB}));
}

}  // namespace
