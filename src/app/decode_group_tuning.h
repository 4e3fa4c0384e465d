// --decode-groups at start-up: the timing behind auto, which times a hop around the replica's ring and
// this stage's decode steps (all stages at once, as they run); the rule and the choice from the times
// are planning/decode_group_plan.h's. The choice and its inputs go to the log and the results.
#pragma once
#include <cstdint>

#include "app/options.h"
#include "comm/channel.h"
#include "compute/compute_throttle.h"
#include "compute/transformer_stage.h"
#include "pipeline/scheduler.h"
#include "planning/decode_group_plan.h"
#include "planning/decode_group_retune.h"

namespace glacier::app {

// Timed runs of each decode step after one untimed warm-up; the median counts. Each run repeats the step
// for at least kDecodeStepRunSeconds, so that it spans several of the kernel's time slices: the other
// stages compute at the same moments, as in the run, and a step's time includes their share of the host
// (a single 1 ms step often runs on a core alone, and on a shared host timed 5-20 times faster than the run's).
constexpr int kDecodeStepRuns = 3;
constexpr double kDecodeStepRunSeconds = 0.02;
// Trips around the ring for the hop time (the fastest counts: comm/ring_timing.h).
constexpr int kRingTrips = 9;

// Collective over the replica's channel `pipe` (every stage of one pipeline) when auto measures:
// a pipeline of more than one stage in --mode generate. `stage` is this rank's, with its KV cache
// allocated: the timing writes its slots' first positions, which every sequence's prefill overwrites
// before anything reads them.
planning::DecodeGroupPlan plan_decode_groups(const JobOptions& o, comm::Channel& pipe, compute::TransformerStage& stage,
                                             int32_t slots, const compute::ComputeThrottle& throttle);

// Lets `r` choose each micro-batch's decode groups in `sched`, logging each change once at info level.
void retune_between_waves(pipeline::Scheduler& sched, planning::DecodeGroupRetuner& r);

}  // namespace glacier::app
