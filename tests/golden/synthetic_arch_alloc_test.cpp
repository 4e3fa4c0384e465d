// The steady-state decode loop allocates nothing on the heap for the architectures with their own
// compute paths (MoE routing and experts, the shared expert, the GELU table). This binary counts
// calls to the global operator new (as tests/unit/decode_alloc_test.cpp does for llama).
#include <gtest/gtest.h>


#include "common/decode_allocations.h"
#include "common/stage_harness.h"
#include "common/test_env.h"

namespace {

// Plain TESTs calling this (not TEST_P): gtest's parameter registry, inlined next to the replaced
// operator new, trips g++ 12's -Wmismatched-new-delete.
void expect_no_decode_allocations(const char* name) {
  GLACIER_REQUIRE_SHARED(model, std::string("models/synthetic/") + name + ".gguf");
  ASSERT_TRUE(glacier::testing::counter_sees_allocations());
  constexpr int32_t kSeqs = 4, kNewTokens = 80;
  glacier::testing::StageHarness h(model, {}, 64, kSeqs, 256);
  std::vector<glacier::pipeline::SequenceRequest> requests;
  for (int32_t i = 0; i < kSeqs; ++i) {
    glacier::pipeline::SequenceRequest r;
    r.seq = i;
    r.tokens = {1, 40 + i, 300, 7, 99 + 3 * i};
    r.max_new_tokens = kNewTokens;
    requests.push_back(std::move(r));
  }
  const std::vector<int64_t> counts =
      glacier::testing::allocations_per_round(*h.stages.front(), kSeqs, 256, std::move(requests));
  // Rounds 10..100 are pure decode: every sequence is past its prompt and none has finished.
  ASSERT_GT(counts.size(), 110u);
  const int64_t during = counts[100] - counts[10];
  std::printf("%s: heap allocations in 90 decode rounds: %lld\n", name, static_cast<long long>(during));
  EXPECT_EQ(during, 0);
}

TEST(SyntheticArchDecodeAllocations, MixtralQ8_0) { expect_no_decode_allocations("synth-mixtral-q8_0"); }
TEST(SyntheticArchDecodeAllocations, Qwen2MoeSharedExpert) { expect_no_decode_allocations("synth-qwen2moe-f32"); }
TEST(SyntheticArchDecodeAllocations, Qwen3Moe) { expect_no_decode_allocations("synth-qwen3moe-f32"); }
TEST(SyntheticArchDecodeAllocations, GemmaGeluTable) { expect_no_decode_allocations("synth-gemma-f32"); }
TEST(SyntheticArchDecodeAllocations, Phi3FusedViews) { expect_no_decode_allocations("synth-phi3-f32"); }

}  // namespace
