// The steady-state decode loop (scheduling, compute, sampling, applying results) must not touch the
// heap: every buffer is sized at start-up. This binary counts calls to the global operator new.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "common/engine_harness.h"
#include "common/test_env.h"
#include "pipeline/local_ring.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

// A ring that records the allocation count at every submit, so the test sees each loop round.
class CountingRing : public glacier::pipeline::Ring {
 public:
  explicit CountingRing(glacier::pipeline::Ring& inner) : inner_(inner) { counts.reserve(4096); }
  int n_stages() const override { return inner_.n_stages(); }
  void submit(const glacier::compute::MicroBatch& mb) override {
    counts.push_back(g_allocations.load());
    inner_.submit(mb);
  }
  bool poll(glacier::compute::MicroBatchResult& out, bool wait) override { return inner_.poll(out, wait); }
  std::vector<int64_t> counts;

 private:
  glacier::pipeline::Ring& inner_;
};

TEST(DecodeAllocations, SteadyStateDecodeStepAllocatesNothing) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  {  // the counter sees allocations at all (else the check below could not fail)
    const int64_t before = g_allocations.load();
    auto* probe = new std::vector<int>(3);
    delete probe;
    ASSERT_GE(g_allocations.load() - before, 2);
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
