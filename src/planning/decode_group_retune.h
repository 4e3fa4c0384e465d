// --decode-groups auto between waves: re-runs the decode-group rule (decode_group_choice.h) with the
// live count of generating sequences in place of the slots when that count has moved by a factor since
// the last choice, and checks each choice against the run's measured rate (decode_group_trials.h).
// Pure: the driver's scheduler feeds it its counts and a clock between micro-batches.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "planning/decode_group_choice.h"
#include "planning/decode_group_trials.h"

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
  // Why: false for the rule's re-choice at a new live count, true for a measured trial's gain (the
  // rates are then the decode steps a second measured at `from` and at `to`).
  bool measured = false;
  double from_rate = 0.0;
  double to_rate = 0.0;
};

class DecodeGroupRetuner {
 public:
  // `start` holds the start-up inputs (slots = the count the start-up choice assumed) and `groups` the
  // start-up choice. Throws std::invalid_argument on inputs the rule refuses.
  DecodeGroupRetuner(DecodeGroupInputs start, int32_t groups);
  // The rule alone: the groups given `live` generating sequences; records a change. A live count of 0
  // (nothing admitted) keeps the current choice.
  int32_t groups_for(int32_t live);
  // The groups for the next micro-batch: the rule at p.live, then the measured trials around each of
  // its choices (a count being tried is used but recorded only when it wins).
  int32_t groups_for(const DecodeProgress& p);
  int32_t groups() const { return groups_; }  // the current choice (a count on trial aside)
  const std::vector<DecodeGroupRetune>& retunes() const { return retunes_; }
  // Every trial window measured, in order.
  const std::vector<DecodeGroupTrial>& trials() const { return trial_log_; }

 private:
  void start_trials(const DecodeProgress& p);

  DecodeGroupInputs in_;
  int32_t groups_;
  int32_t chosen_at_;  // the live count the current choice was made for
  std::vector<DecodeGroupRetune> retunes_;
  std::optional<DecodeGroupTrials> trials_;  // around the current choice, from the first progress
  size_t trials_logged_ = 0;                 // of trials_->trials(), copied to trial_log_
  std::vector<DecodeGroupTrial> trial_log_;
};

}  // namespace glacier::planning
