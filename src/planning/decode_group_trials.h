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
// A comparison measures four windows, the incumbent count, the candidate twice, the incumbent again: the
// rate drifts within a wave (each step attends to a longer context: a 256-token wave of the hop
// benchmark decodes half as fast at its end), and this order cancels a steady drift. The candidate wins
// only when it leads in both halves (window 1 against 0, 2 against 3) and by a gain above kTrialGain and
// above the windows' scatter (how far the drift the incumbent's pair shows and the candidate's pair's
// disagree), so on a host whose windows scatter (a 2-core VM shared with other jobs: 15% from one window
// to the next) the model's choice mostly stands, and a quiet cluster node can move for a few percent.
//
// Rounds before a window opens after a change (micro-batches grouped the old way are still in the ring),
// at the start and after a prefill (the new sequences' decode steps wait for their first token: the first
// window of a run measured 40% of the rate that followed on a 4-stage ring with 1 ms hops).
constexpr int kTrialWarmUpRounds = 1;
// Rounds (decode steps of every live sequence) a window spans.
constexpr int kTrialWindowRounds = 4;
// The least gain a candidate must show: below it, a move is not worth its measurement's doubt.
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
  // The best count measured (the starting one until a candidate beats it), and its rate in the
  // comparison it won (0 while the starting count holds).
  int32_t best_groups() const { return best_.groups; }
  double best_rate() const { return best_.steps_per_second; }
  // The starting count's rate in the first comparison (0 before it ends).
  double start_rate() const { return start_rate_; }
  // Every window measured, in order.
  const std::vector<DecodeGroupTrial>& trials() const { return trials_; }

 private:
  enum class Direction { kUp, kDown, kDone };
  // Window k (0..3) of a comparison measures the incumbent, the candidate, the candidate, the incumbent.
  void begin_window(int32_t groups, const DecodeProgress& p);
  // The next window opens after kTrialWarmUpRounds rounds of decode steps from now.
  void warm_up(const DecodeProgress& p);
  void open_window(const DecodeProgress& p);
  void window_done(double rate, const DecodeProgress& p);
  void decide(const DecodeProgress& p);
  // Starts the next comparison from best_ in direction_, or settles when the range has no candidate.
  void next_comparison(const DecodeProgress& p);

  int32_t lowest_, highest_, step_;
  int32_t current_;
  Direction direction_ = Direction::kUp;
  bool moved_ = false;  // a candidate has beaten the starting count
  DecodeGroupTrial best_;
  int32_t candidate_ = 0;
  int window_ = 0;       // of the comparison, 0..3
  double rates_[4] = {};
  // The window: opens once decode_steps reach opens_at, then spans kTrialWindowRounds rounds of `live`.
  int64_t opens_at_ = 0;
  bool open_ = false;
  int32_t window_live_ = 0;
  int64_t steps0_ = 0, prompt0_ = 0;
  double t0_ = 0.0;
  double start_rate_ = 0.0;
  std::vector<DecodeGroupTrial> trials_;
};

}  // namespace glacier::planning
