// --decode-groups auto: the number of decode groups that the pipeline design's decode model predicts
// fastest, from a hop's time, each stage's measured time for a decode step of a given row count and
// the slots. Pure: the measurements are taken elsewhere (app/decode_group_tuning).
#pragma once
#include <cstdint>
#include <vector>

namespace glacier::planning {

// Seconds one stage takes for a decode step of `rows` rows, measured at a few row counts.
struct StageStepCosts {
  std::vector<int32_t> rows;     // ascending, at least one, each >= 1
  std::vector<double> seconds;   // one per entry of rows
  // Linear between the measured row counts; the first measurement below them, the last segment's
  // slope (or flat, with one measurement) beyond them.
  double at(int32_t n) const;
};

// The least-squares line t(b) = fixed + per_row x b through the measurements, with fixed and per_row
// kept >= 0, as costs at the same row counts. A step on a shared host is timed with a few percent of
// noise at each row count; a line keeps that noise from reading as batch efficiency lost or gained
// (the kernels' row tiles make the true costs slightly jagged, which the line gives up).
StageStepCosts linear_fit(const StageStepCosts& measured);

struct DecodeGroupInputs {
  int32_t n_stages = 1;
  int32_t slots = 1;           // sequences that decode at once, at most
  int32_t max_groups = 1;      // the most groups allowed (micro-batches in flight the memory check counted)
  double hop_seconds = 0.0;    // one message from a stage to the next, one way
  std::vector<StageStepCosts> stages;  // one per stage
};

struct DecodeGroupChoice {
  int32_t groups = 1;
  double seconds_per_token = 0.0;           // predicted at `groups`
  double default_seconds_per_token = 0.0;   // predicted at one group a stage
};

// A choice departs from the fewest groups only for a predicted gain above this fraction: the step costs
// are measured on hosts that may be shared (a few percent of noise), and every extra group costs
// messages and smaller, less efficient matrix products that the model prices only through the costs.
constexpr double kDecodeGroupsNearBest = 0.02;

// The decode model (pipeline-design.md, benchmarks/scaling/pipeline_model.py formula_job): G groups of
// b = ceil(slots / G) sequences (so ceil(slots / b) groups actually form) each take a step through
// every stage and a hop after each; a round, in which every sequence gains a token, lasts
// max(sum_s t_s(b) + P h, groups x max_s t_s(b)): a group's trip around the ring, or the slowest
// stage computing every group's step. Returns the round's seconds divided by the slots.
double predicted_seconds_per_token(const DecodeGroupInputs& in, int32_t groups);

// The fewest groups, from one a stage up to min(slots, max_groups), whose predicted time per token is
// within kDecodeGroupsNearBest of the best. One stage: one group (it computes as it submits). Throws
// std::invalid_argument on inconsistent inputs (no stage costs, unsorted rows, negative times).
DecodeGroupChoice choose_decode_groups(const DecodeGroupInputs& in);

}  // namespace glacier::planning
