// The measured trials of --decode-groups auto: comparisons of four windows (incumbent, candidate twice,
// incumbent), a climb up from the model's choice and, when the first step up loses, a climb down.
#include "planning/decode_group_trials.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace glacier::planning {

DecodeGroupTrials::DecodeGroupTrials(int32_t groups, int32_t lowest, int32_t highest, int32_t step,
                                     const DecodeProgress& now)
    : lowest_(lowest), highest_(highest), step_(step), current_(groups) {
  if (groups < 1 || step < 1 || lowest < 1 || highest < lowest)
    throw std::invalid_argument("decode group trials: expected groups, a step and a range of at least 1");
  best_ = {groups, 0.0};
  if (groups < lowest || groups > highest) {
    direction_ = Direction::kDone;
    return;
  }
  next_comparison(now);
}

void DecodeGroupTrials::next_comparison(const DecodeProgress& p) {
  while (direction_ != Direction::kDone) {
    const int32_t next = direction_ == Direction::kUp ? best_.groups + step_ : best_.groups - step_;
    if (next >= lowest_ && next <= highest_) {
      candidate_ = next;
      window_ = 0;
      begin_window(best_.groups, p);
      return;
    }
    direction_ = direction_ == Direction::kUp && !moved_ ? Direction::kDown : Direction::kDone;
  }
  current_ = best_.groups;
  open_ = false;
}

void DecodeGroupTrials::begin_window(int32_t groups, const DecodeProgress& p) {
  // A warm-up first when micro-batches of the other grouping are still in the ring, and before the very
  // first window: the trials start with the first admitted sequences, whose decode steps go out only once
  // their prefill has crossed the whole ring.
  if (groups != current_ || trials_.empty()) {
    current_ = groups;
    warm_up(p);
  } else {  // the same count as the window just measured: the next window starts now
    open_window(p);
  }
}

void DecodeGroupTrials::warm_up(const DecodeProgress& p) {
  open_ = false;
  opens_at_ = p.decode_steps + static_cast<int64_t>(kTrialWarmUpRounds) * std::max(p.live, 1);
}

void DecodeGroupTrials::open_window(const DecodeProgress& p) {
  open_ = true;
  window_live_ = std::max(p.live, 1);
  steps0_ = p.decode_steps;
  prompt0_ = p.prompt_tokens;
  t0_ = p.seconds;
}

int32_t DecodeGroupTrials::observe(const DecodeProgress& p) {
  if (direction_ == Direction::kDone || p.decode_steps < opens_at_) return current_;
  if (!open_) {
    open_window(p);
    return current_;
  }
  const int64_t steps = p.decode_steps - steps0_;
  if (static_cast<double>(p.prompt_tokens - prompt0_) >
      kTrialMaxPrefillShare * static_cast<double>(std::max<int64_t>(steps, window_live_))) {
    // The new sequences' first decode steps wait for their prefill to cross the ring: warm up again.
    warm_up(p);
    return current_;
  }
  if (steps < static_cast<int64_t>(kTrialWindowRounds) * window_live_ || p.seconds <= t0_) return current_;
  window_done(static_cast<double>(steps) / (p.seconds - t0_), p);
  return current_;
}

void DecodeGroupTrials::window_done(double rate, const DecodeProgress& p) {
  trials_.push_back({current_, rate});
  rates_[window_++] = rate;
  if (window_ == 4) {
    decide(p);
    return;
  }
  begin_window(window_ == 3 ? best_.groups : candidate_, p);
}

void DecodeGroupTrials::decide(const DecodeProgress& p) {
  // Windows about evenly spaced: a steady drift of d a window moves the incumbent's pair by 3d and the
  // candidate's by d, and cancels from the means. What the two pairs disagree on beyond that is scatter.
  const double incumbent = 0.5 * (rates_[0] + rates_[3]), candidate = 0.5 * (rates_[1] + rates_[2]);
  const double spread = std::fabs((rates_[3] - rates_[0]) / 3.0 - (rates_[2] - rates_[1])) / incumbent;
  if (start_rate_ == 0.0) start_rate_ = incumbent;
  // And the candidate must lead in both halves (window 1 against 0, 2 against 3): a slow spell in one of
  // the incumbent's windows lowers its mean by half and the scatter measure by only a third.
  const bool leads_both_halves = rates_[1] > rates_[0] && rates_[2] > rates_[3];
  if (leads_both_halves && candidate > incumbent * (1.0 + std::max(kTrialGain, spread))) {
    best_ = {candidate_, candidate};
    moved_ = true;
  } else if (direction_ == Direction::kUp && !moved_) {
    direction_ = Direction::kDown;  // the first step up lost: try fewer
  } else {
    direction_ = Direction::kDone;
  }
  next_comparison(p);
}

}  // namespace glacier::planning
