// The steady-state decode loop (scheduling, compute, sampling, applying results) must not touch the
// heap: every buffer is sized at start-up. This binary counts calls to the global operator new.
#include <gtest/gtest.h>


#include "common/decode_allocations.h"
#include "common/engine_harness.h"
#include "common/test_env.h"

namespace {

TEST(DecodeAllocations, SteadyStateDecodeStepAllocatesNothing) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  ASSERT_TRUE(glacier::testing::counter_sees_allocations());
  glacier::testing::EngineHarness eng(model, 512, 8, 64, 2);
  std::vector<glacier::pipeline::SequenceRequest> requests;
  for (int i = 0; i < 8; ++i) {
    glacier::pipeline::SequenceRequest r;
    r.seq = i;
    r.tokens = eng.tok->encode("Once upon a time there was a", true, false);
    r.max_new_tokens = 100;
    r.sampling.temperature = i % 2 ? 0.8f : 0.0f;  // greedy and sampled sequences both
    r.sampling.top_k = 40;
    r.sampling.top_p = 0.9f;
    requests.push_back(std::move(r));
  }
  const std::vector<int64_t> counts = glacier::testing::allocations_per_round(*eng.stage, 8, 512, std::move(requests));
  // Rounds 20..150 are pure decode: every sequence is past its prompt and none has finished.
  ASSERT_GT(counts.size(), 160u);
  const int64_t during = counts[150] - counts[20];
  std::printf("heap allocations in 130 decode rounds: %lld\n", static_cast<long long>(during));
  EXPECT_EQ(during, 0);
}

}  // namespace
