// The re-tune rule of --decode-groups auto: re-chooses on a factor-of-two move of the live count and runs
// the measured trials around each choice.
#include "planning/decode_group_retune.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>

namespace glacier::planning {

DecodeGroupRetuner::DecodeGroupRetuner(DecodeGroupInputs start, int32_t groups)
    : in_(std::move(start)), groups_(groups), chosen_at_(in_.slots) {
  if (groups < 1) throw std::invalid_argument("decode groups: expected at least one group to start from");
  (void)predicted_seconds_per_token(in_, groups);  // checks the inputs now rather than mid-run
}

int32_t DecodeGroupRetuner::groups_for(int32_t live) {
  if (live < 1) return groups_;
  const bool halved = static_cast<double>(live) * kDecodeGroupsRetuneFactor <= chosen_at_;
  const bool doubled = static_cast<double>(live) >= kDecodeGroupsRetuneFactor * chosen_at_;
  if (!halved && !doubled) return groups_;
  chosen_at_ = live;
  DecodeGroupInputs now = in_;
  now.slots = live;
  const int32_t to = choose_decode_groups(now).groups;
  if (to != groups_) {
    retunes_.push_back({live, groups_, to});
    groups_ = to;
  }
  return groups_;
}

void DecodeGroupRetuner::start_trials(const DecodeProgress& p) {
  const int32_t highest = std::max(1, std::min(p.live, in_.max_groups));
  const int32_t lowest = std::min(in_.n_stages, highest);
  trials_.emplace(groups_, lowest, highest, std::max(1, in_.n_stages / 2), p);
  trials_logged_ = 0;
}

int32_t DecodeGroupRetuner::groups_for(const DecodeProgress& p) {
  if (p.live < 1) return groups_;  // nothing admitted yet: trials start with the first sequences
  const int32_t chosen_at = chosen_at_;
  groups_for(p.live);
  if (!trials_ || chosen_at_ != chosen_at) start_trials(p);
  const bool was_settled = trials_->settled();
  const int32_t use = trials_->observe(p);
  const std::vector<DecodeGroupTrial>& t = trials_->trials();
  trial_log_.insert(trial_log_.end(), t.begin() + static_cast<std::ptrdiff_t>(trials_logged_), t.end());
  trials_logged_ = t.size();
  if (!was_settled && trials_->settled() && trials_->best_groups() != groups_) {
    retunes_.push_back({p.live, groups_, trials_->best_groups(), true, trials_->start_rate(), trials_->best_rate()});
    groups_ = trials_->best_groups();
  }
  return use;
}

}  // namespace glacier::planning
