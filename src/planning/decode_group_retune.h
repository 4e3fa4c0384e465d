// --decode-groups auto between waves: re-runs the decode-group rule (decode_group_choice.h) with the
// live count of generating sequences in place of the slots when that count has moved by a factor since
// the last choice. Pure: the driver's scheduler feeds it the count between micro-batches.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "planning/decode_group_choice.h"

namespace glacier::planning {

// A re-choice happens when the live count has halved or doubled since the count the last choice was
// made for. A factor of two is where the rule's answer can move (a group's rows, ceil(live / G), change
// by about as much), and since getting back needs the opposite factor of two, a count that wobbles by a
// sequence or two as sequences finish and are replaced never flaps between two choices.
constexpr double kDecodeGroupsRetuneFactor = 2.0;

struct DecodeGroupRetune {
  int32_t at_live = 0;  // live (admitted, generating) sequences when the choice changed
  int32_t from = 0;
  int32_t to = 0;
};

class DecodeGroupRetuner {
 public:
  // `start` holds the start-up inputs (slots = the count the start-up choice assumed) and `groups` the
  // start-up choice. Throws std::invalid_argument on inputs the rule refuses.
  DecodeGroupRetuner(DecodeGroupInputs start, int32_t groups);
  // The groups to use for the next micro-batch given `live` generating sequences; records a change.
  // A live count of 0 (nothing admitted) keeps the current choice.
  int32_t groups_for(int32_t live);
  int32_t groups() const { return groups_; }
  const std::vector<DecodeGroupRetune>& retunes() const { return retunes_; }

 private:
  DecodeGroupInputs in_;
  int32_t groups_;
  int32_t chosen_at_;  // the live count the current choice was made for
  std::vector<DecodeGroupRetune> retunes_;
};

}  // namespace glacier::planning
