// --decode-groups auto checked against the run: after the decode model's choice the leader measures the
// decode rate it gets, then tries neighbouring group counts (more first, then fewer) and keeps one only
// for a measured gain. Pure: the scheduler's counts and a clock are fed in (app/decode_group_tuning).
#pragma once
#include <cstdint>
#include <vector>

namespace glacier::planning {

// What the leader has sent into the ring so far, and when.
struct DecodeProgress {
  int32_t live = 0;           // admitted generate sequences
  int64_t decode_steps = 0;   // decode steps sent (one a sequence a round)
  int64_t prompt_tokens = 0;  // prompt tokens sent (prefill)
  double seconds = 0.0;       // a monotonic clock
};

// The model prices the hop as one idle trip around the ring measured it and each step as timed at
// start-up. A shared host's scheduling delays, and the jitter of real links and stages, are in neither;
// a group beyond one a stage absorbs them (a stage computes a queued group while another crosses a link),
// so a choice can be off by 20% where the model sees a tie. The run's own rate settles it.
//
// Rounds after a change before its window opens: micro-batches grouped the old way are still in the ring.
constexpr int kTrialWarmUpRounds = 1;
// Rounds (decode steps of every live sequence) a window spans.
constexpr int kTrialWindowRounds = 6;
// A trial is kept only for a rate this much above the best so far: windows of a few rounds of one run
// measure the same setting a few percent apart on a shared host, so a smaller gain may be noise.
constexpr double kTrialGain = 0.03;
// A window in which more prompt tokens than this share of its decode steps were prefilled measures
// prefill too: it is discarded and reopened.
constexpr double kTrialMaxPrefillShare = 0.1;

struct DecodeGroupTrial {
  int32_t groups = 0;
  double steps_per_second = 0.0;
};

class DecodeGroupTrials {
 public:
  // Starting at `groups` (the model's choice for `now.live` sequences), trying counts in [lowest, highest]
  // `step` apart. No trials when the range holds only `groups`.
  DecodeGroupTrials(int32_t groups, int32_t lowest, int32_t highest, int32_t step, const DecodeProgress& now);
  // The groups for the next micro-batch, given the progress when it is built.
  int32_t observe(const DecodeProgress& p);
  int32_t groups() const { return current_; }
  bool settled() const { return direction_ == Direction::kDone; }
  // The best count measured (the starting one until a trial beats it by kTrialGain).
  int32_t best_groups() const { return best_.groups; }
  // Every window measured, in order.
  const std::vector<DecodeGroupTrial>& trials() const { return trials_; }

 private:
  enum class Direction { kUp, kDown, kDone };
  void switch_to(int32_t groups, const DecodeProgress& p);
  void open_window(const DecodeProgress& p);
  void decide(double rate, const DecodeProgress& p);

  int32_t lowest_, highest_, step_;
  int32_t current_;
  Direction direction_ = Direction::kUp;
  bool moved_ = false;  // a trial has beaten the starting count
  DecodeGroupTrial best_;
  bool measured_any_ = false;
  // The window: opens once decode_steps reach opens_at, then spans `rounds` rounds of `live` sequences.
  int64_t opens_at_ = 0;
  bool open_ = false;
  int32_t window_live_ = 0;
  int64_t steps0_ = 0, prompt0_ = 0;
  double t0_ = 0.0;
  std::vector<DecodeGroupTrial> trials_;
};

}  // namespace glacier::planning
