// Test helpers for the no-heap-in-decode checks: a probe of the counter and a counted decode run.
#include "common/decode_allocations.h"

#include <utility>

#include "common/alloc_counter.h"
#include "pipeline/local_ring.h"

namespace glacier::testing {

bool counter_sees_allocations() {
  const int64_t before = allocation_count();
  auto* probe = new std::vector<int>(3);
  // An opaque use of the probe: the compiler may drop a new/delete pair it sees whole.
  asm volatile("" : : "g"(probe) : "memory");
  delete probe;
  return allocation_count() - before >= 2;
}

std::vector<int64_t> allocations_per_round(compute::TransformerStage& stage, int32_t n_slots, int32_t n_ctx,
                                           std::vector<pipeline::SequenceRequest> requests) {
  pipeline::LocalRing local(stage, 4);
  CountingRing ring(local);
  pipeline::SchedulerOptions opt;
  opt.n_slots = n_slots;
  opt.n_ctx = n_ctx;
  opt.ubatch = 64;
  opt.max_in_flight = 2;
  opt.decode_groups = 2;
  pipeline::Scheduler sched(opt, ring, [](const pipeline::SequenceOutcome&) { return false; },
                            [](pipeline::SequenceOutcome&&) {});
  for (pipeline::SequenceRequest& r : requests) sched.add(std::move(r));
  sched.run();
  return ring.counts;
}

}  // namespace glacier::testing
