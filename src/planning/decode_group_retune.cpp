// The re-tune rule of --decode-groups auto: re-chooses on a factor-of-two move of the live count.
#include "planning/decode_group_retune.h"

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

}  // namespace glacier::planning
