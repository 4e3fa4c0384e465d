// The measured trials of --decode-groups auto: windows of decode rounds at each count, a climb up from
// the model's choice and, when no step up gained, a climb down.
#include "planning/decode_group_trials.h"

#include <algorithm>
#include <stdexcept>

namespace glacier::planning {

DecodeGroupTrials::DecodeGroupTrials(int32_t groups, int32_t lowest, int32_t highest, int32_t step,
                                     const DecodeProgress& now)
    : lowest_(lowest), highest_(highest), step_(step), current_(groups) {
  if (groups < 1 || step < 1 || lowest < 1 || highest < lowest)
    throw std::invalid_argument("decode group trials: expected groups, a step and a range of at least 1");
  best_ = {groups, 0.0};
  if (groups < lowest || groups > highest || (groups == lowest && groups == highest)) {
    direction_ = Direction::kDone;
    return;
  }
  switch_to(groups, now);
}

void DecodeGroupTrials::switch_to(int32_t groups, const DecodeProgress& p) {
  current_ = groups;
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
  if (static_cast<double>(p.prompt_tokens - prompt0_) > kTrialMaxPrefillShare * static_cast<double>(std::max<int64_t>(steps, window_live_))) {
    open_window(p);
    return current_;
  }
  if (steps < static_cast<int64_t>(kTrialWindowRounds) * window_live_ || p.seconds <= t0_) return current_;
  decide(static_cast<double>(steps) / (p.seconds - t0_), p);
  return current_;
}

void DecodeGroupTrials::decide(double rate, const DecodeProgress& p) {
  trials_.push_back({current_, rate});
  if (!measured_any_) {
    measured_any_ = true;
    best_ = {current_, rate};
  } else if (rate > best_.steps_per_second * (1.0 + kTrialGain)) {
    best_ = {current_, rate};
    moved_ = true;
  } else if (direction_ == Direction::kUp && !moved_) {
    direction_ = Direction::kDown;  // up lost at the first step: try fewer
  } else {
    direction_ = Direction::kDone;
  }
  // The next count in the direction from the best so far, if the range has one.
  while (direction_ != Direction::kDone) {
    const int32_t next = direction_ == Direction::kUp ? best_.groups + step_ : best_.groups - step_;
    if (next >= lowest_ && next <= highest_) {
      switch_to(next, p);
      return;
    }
    direction_ = direction_ == Direction::kUp && !moved_ ? Direction::kDown : Direction::kDone;
  }
  current_ = best_.groups;
  open_ = false;
}

}  // namespace glacier::planning
