// Test helpers for the no-heap-in-decode checks: whether the allocation counter sees allocations at all,
// and the allocation count at every scheduling round of a decode run on one stage.
#pragma once
#include <cstdint>
#include <vector>

#include "compute/transformer_stage.h"
#include "pipeline/scheduler.h"

namespace glacier::testing {

// A probe allocation moves the counter (by 2 or more): else a check that a loop allocates nothing could
// not fail.
bool counter_sees_allocations();

// Runs `requests` to the end through a scheduler over a local ring on `stage` (n_slots, n_ctx, micro-batches
// of 64 rows, 2 in flight, 2 decode groups) and returns the allocation count at every micro-batch it
// submitted, one a scheduling round (CountingRing).
std::vector<int64_t> allocations_per_round(compute::TransformerStage& stage, int32_t n_slots, int32_t n_ctx,
                                           std::vector<pipeline::SequenceRequest> requests);

}  // namespace glacier::testing
