// --decode-groups' decisions on plain figures: an explicit count as given; auto's reason not to measure,
// or the row counts it times and its choice from the measured hop and step times (the decode model of
// planning/decode_group_choice.h). The timing itself is app/decode_group_tuning's.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planning/decode_group_choice.h"
#include "planning/decode_group_retune.h"

namespace glacier::planning {

struct DecodeGroupPlan {
  int32_t groups = 1;          // what the scheduler gets
  std::string rule;            // "auto", "--decode-groups N", or why auto measured nothing
  int32_t slots = 0;
  int32_t max_groups = 0;      // auto's bound (the micro-batches in flight the memory check counted)
  double hop_seconds = 0.0;    // measured (auto with a ring only)
  std::vector<planning::StageStepCosts> measured_steps;  // one per stage (idem)
  std::vector<planning::StageStepCosts> stages;          // their lines (planning::linear_fit), the rule's input
  planning::DecodeGroupChoice choice;            // idem
  bool measured() const { return !stages.empty(); }
  int32_t largest_rows() const;     // the largest row count timed (0 when nothing was)
  std::string describe() const;     // the log line's text
  nlohmann::json to_json() const;   // the results file's decode_groups attribute
};

// What --decode-groups asks for: a count (0 = one a stage) or auto.
struct DecodeGroupRequest {
  bool automatic = false;
  int32_t count = 0;       // when not automatic
  bool has_decode_steps = true;  // false for a --mode without decode steps (score, perplexity)
  std::string mode;        // the --mode, named in auto's reason when it has no decode steps
};

// The plan before anything is timed. `to_time` is set (auto's bound in plan.max_groups) only when auto
// measures: a pipeline of more than one stage whose mode has decode steps.
struct DecodeGroupStart {
  DecodeGroupPlan plan;
  bool to_time = false;
};
DecodeGroupStart start_decode_group_plan(const DecodeGroupRequest& req, int n_stages, int32_t slots);

// The rows of one group at one group a stage, no more than a micro-batch (`max_tokens`) holds: the
// largest decode step auto times.
int32_t largest_timed_rows(int32_t slots, int n_stages, int32_t max_tokens);
// Row counts to time: powers of two below `largest`, and `largest` itself.
std::vector<int32_t> rows_to_time(int32_t largest);

// Auto's choice from the measured hop and every stage's step times (one StageStepCosts a stage, at the
// same row counts): each stage's line through its times, and the decode model's count.
void choose_from_timings(DecodeGroupPlan& plan, double hop_seconds, std::vector<planning::StageStepCosts> measured_steps);

// Re-tuning between waves (planning/decode_group_retune.h): a re-tuner starting from the plan's choice
// when auto measured, none otherwise (an explicit --decode-groups N never re-tunes). It re-uses the
// start-up step-cost lines: the stages' own compute times stay on their ranks (the driver's trace holds
// only its own stage's), and gathering them would cost messages in the run.
std::optional<planning::DecodeGroupRetuner> make_retuner(const DecodeGroupPlan& plan);
// The plan's results attribute with the re-choices the run made, as `retunes` [{at_live, from, to, why
// ("live" or "measured", with from_steps_per_s and to_steps_per_s)}], and its trial windows as `trials`
// [{groups, steps_per_s}].
nlohmann::json with_retunes(const DecodeGroupPlan& plan, const std::vector<planning::DecodeGroupRetune>& retunes,
                            const std::vector<planning::DecodeGroupTrial>& trials);

}  // namespace glacier::planning
