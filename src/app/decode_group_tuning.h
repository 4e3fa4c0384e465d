// --decode-groups at start-up: an explicit count as given, or auto, which times a hop around the
// replica's ring and this stage's decode steps (all stages at once, as they run) and lets the decode
// model (pipeline/decode_group_choice.h) choose; the choice and its inputs go to the log and the results.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/options.h"
#include "comm/channel.h"
#include "compute/transformer_stage.h"
#include "pipeline/compute_throttle.h"
#include "pipeline/decode_group_choice.h"
#include "pipeline/decode_group_retune.h"
#include "pipeline/scheduler.h"

namespace glacier::app {

// Timed runs of each decode step after one untimed warm-up; the median counts. Each run repeats the step
// for at least kDecodeStepRunSeconds, so that it spans several of the kernel's time slices: the other
// stages compute at the same moments, as in the run, and a step's time includes their share of the host
// (a single 1 ms step often runs on a core alone, and on a shared host timed 5-20 times faster than the run's).
constexpr int kDecodeStepRuns = 3;
constexpr double kDecodeStepRunSeconds = 0.02;
// Trips around the ring for the hop time (the fastest counts: comm/ring_timing.h).
constexpr int kRingTrips = 9;

struct DecodeGroupPlan {
  int32_t groups = 1;          // what the scheduler gets
  std::string rule;            // "auto", "--decode-groups N", or why auto measured nothing
  int32_t slots = 0;
  int32_t max_groups = 0;      // auto's bound (the micro-batches in flight the memory check counted)
  double hop_seconds = 0.0;    // measured (auto with a ring only)
  std::vector<pipeline::StageStepCosts> measured_steps;  // one per stage (idem)
  std::vector<pipeline::StageStepCosts> stages;          // their lines (pipeline::linear_fit), the rule's input
  pipeline::DecodeGroupChoice choice;            // idem
  bool measured() const { return !stages.empty(); }
  int32_t largest_rows() const;     // the largest row count timed (0 when nothing was)
  std::string describe() const;     // the log line's text
  nlohmann::json to_json() const;   // the results file's decode_groups attribute
};

// Collective over the replica's channel `pipe` (every stage of one pipeline) when auto measures:
// a pipeline of more than one stage in --mode generate. `stage` is this rank's, with its KV cache
// allocated: the timing writes its slots' first positions, which every sequence's prefill overwrites
// before anything reads them.
DecodeGroupPlan plan_decode_groups(const JobOptions& o, comm::Channel& pipe, compute::TransformerStage& stage,
                                   int32_t slots, const pipeline::ComputeThrottle& throttle);

// Re-tuning between waves (pipeline/decode_group_retune.h): a re-tuner starting from the plan's choice
// when auto measured, none otherwise (an explicit --decode-groups N never re-tunes). It re-uses the
// start-up step-cost lines: the stages' own compute times stay on their ranks (the driver's trace holds
// only its own stage's), and gathering them would cost messages in the run.
std::optional<pipeline::DecodeGroupRetuner> make_retuner(const DecodeGroupPlan& plan);
// Lets `r` choose each micro-batch's decode groups in `sched`, logging each change once at info level.
void retune_between_waves(pipeline::Scheduler& sched, pipeline::DecodeGroupRetuner& r);
// The plan's results attribute with the re-choices the run made, as `retunes` [{at_live, from, to}].
nlohmann::json with_retunes(const DecodeGroupPlan& plan, const std::vector<pipeline::DecodeGroupRetune>& retunes);

}  // namespace glacier::app
