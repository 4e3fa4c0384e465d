// The steady-state decode loop (scheduling, compute, sampling, applying results) must not touch the
// heap: every buffer is sized at start-up. This binary counts calls to the global operator new.
#include <gtest/gtest.h>


#include "common/engine_harness.h"
#include "common/alloc_counter.h"
#include "common/test_env.h"
#include "pipeline/local_ring.h"

namespace {

using glacier::testing::allocation_count;
using glacier::testing::CountingRing;

TEST(DecodeAllocations, SteadyStateDecodeStepAllocatesNothing) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  {  // the counter sees allocations at all (else the check below could not fail)
    const int64_t before = allocation_count();
    auto* probe = new std::vector<int>(3);
    delete probe;
    ASSERT_GE(allocation_count() - before, 2);
  }
  glacier::testing::EngineHarness eng(model, 512, 8, 64, 2);
  glacier::pipeline::LocalRing local(*eng.stage, 4);
  CountingRing ring(local);
  glacier::pipeline::SchedulerOptions opt;
  opt.n_slots = 8;
  opt.n_ctx = 512;
  opt.ubatch = 64;
  opt.max_in_flight = 2;
  opt.decode_groups = 2;
  glacier::pipeline::Scheduler sched(opt, ring, [](const glacier::pipeline::SequenceOutcome&) { return false; },
                                     [](glacier::pipeline::SequenceOutcome&&) {});
  for (int i = 0; i < 8; ++i) {
    glacier::pipeline::SequenceRequest r;
    r.seq = i;
    r.tokens = eng.tok->encode("Once upon a time there was a", true, false);
    r.max_new_tokens = 100;
    r.sampling.temperature = i % 2 ? 0.8f : 0.0f;  // greedy and sampled sequences both
    r.sampling.top_k = 40;
    r.sampling.top_p = 0.9f;
    sched.add(std::move(r));
  }
  sched.run();
  // Rounds 20..150 are pure decode: every sequence is past its prompt and none has finished.
  ASSERT_GT(ring.counts.size(), 160u);
  const int64_t during = ring.counts[150] - ring.counts[20];
  std::printf("heap allocations in 130 decode rounds: %lld\n", static_cast<long long>(during));
  EXPECT_EQ(during, 0);
}

}  // namespace
