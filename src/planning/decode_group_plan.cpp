// The decode-group decisions and their record: the rule before timing, auto's choice after, the log
// line and the results attribute.
#include "planning/decode_group_plan.h"

#include <algorithm>
#include <cstdio>

#include "planning/memory_fit.h"

namespace glacier::planning {

std::string DecodeGroupPlan::describe() const {
  char buf[160];
  if (!measured()) {
    std::snprintf(buf, sizeof buf, "%d decode groups (%s)", groups, rule.c_str());
    return buf;
  }
  std::string steps;
  for (size_t s = 0; s < stages.size(); ++s) {
    std::snprintf(buf, sizeof buf, "%s%.3g", s ? ", " : "", stages[s].at(largest_rows()) * 1e3);
    steps += buf;
  }
  std::snprintf(buf, sizeof buf,
                "%d decode groups (auto, of %d to %d: %d slots, hop %.3g ms, decode step of %d rows by stage (line) ",
                groups, static_cast<int>(stages.size()), max_groups, slots, hop_seconds * 1e3, largest_rows());
  std::string line = buf + steps;
  std::snprintf(buf, sizeof buf, " ms; predicted %.4g ms a token, %.4g at one group a stage)",
                choice.seconds_per_token * 1e3, choice.default_seconds_per_token * 1e3);
  return line + buf;
}

nlohmann::json DecodeGroupPlan::to_json() const {
  nlohmann::json j = {{"groups", groups}, {"rule", rule}};
  if (!measured()) return j;
  j["slots"] = slots;
  j["max_groups"] = max_groups;
  j["hop_ms"] = hop_seconds * 1e3;
  nlohmann::json steps = nlohmann::json::array();
  for (size_t s = 0; s < stages.size(); ++s) {
    nlohmann::json ms = nlohmann::json::array(), line = nlohmann::json::array();
    for (double t : measured_steps[s].seconds) ms.push_back(t * 1e3);
    for (double t : stages[s].seconds) line.push_back(t * 1e3);
    steps.push_back({{"rows", stages[s].rows}, {"ms", ms}, {"line_ms", line}});
  }
  j["stage_step"] = steps;
  j["predicted_ms_per_token"] = choice.seconds_per_token * 1e3;
  j["predicted_ms_per_token_one_group_a_stage"] = choice.default_seconds_per_token * 1e3;
  return j;
}

int32_t DecodeGroupPlan::largest_rows() const { return stages.empty() ? 0 : stages.front().rows.back(); }

DecodeGroupStart start_decode_group_plan(const DecodeGroupRequest& req, int n_stages, int32_t slots) {
  DecodeGroupStart start;
  DecodeGroupPlan& plan = start.plan;
  plan.slots = slots;
  if (!req.automatic) {
    plan.groups = req.count > 0 ? req.count : n_stages;
    plan.rule = "--decode-groups " + std::to_string(req.count);
    return start;
  }
  plan.groups = n_stages;
  plan.rule = "auto";
  if (n_stages == 1) {
    plan.rule += ": one stage computes each micro-batch as it is submitted";
    return start;
  }
  if (!req.has_decode_steps) {
    plan.rule += ": --mode " + req.mode + " has no decode steps";
    return start;
  }
  // At most the micro-batches in flight the memory check reserved for auto (micro_batches_in_flight(0)).
  plan.max_groups = std::min(slots, micro_batches_in_flight(0, n_stages));
  start.to_time = true;
  return start;
}

int32_t largest_timed_rows(int32_t slots, int n_stages, int32_t max_tokens) {
  return std::clamp((slots + n_stages - 1) / n_stages, 1, max_tokens);
}

std::vector<int32_t> rows_to_time(int32_t largest) {
  std::vector<int32_t> rows;
  for (int32_t r = 1; r < largest; r *= 2) rows.push_back(r);
  rows.push_back(largest);
  return rows;
}

namespace {
// The decode model's inputs from what the plan measured (the choice at start-up and the re-tuner's).
planning::DecodeGroupInputs model_inputs(const DecodeGroupPlan& plan) {
  planning::DecodeGroupInputs in;
  in.n_stages = static_cast<int32_t>(plan.stages.size());
  in.slots = plan.slots;
  in.max_groups = plan.max_groups;
  in.hop_seconds = plan.hop_seconds;
  in.stages = plan.stages;
  return in;
}
}  // namespace

void choose_from_timings(DecodeGroupPlan& plan, double hop_seconds, std::vector<planning::StageStepCosts> measured_steps) {
  plan.hop_seconds = hop_seconds;
  plan.measured_steps = std::move(measured_steps);
  plan.stages.clear();
  for (const planning::StageStepCosts& m : plan.measured_steps) plan.stages.push_back(planning::linear_fit(m));
  plan.choice = planning::choose_decode_groups(model_inputs(plan));
  plan.groups = plan.choice.groups;
}

std::optional<planning::DecodeGroupRetuner> make_retuner(const DecodeGroupPlan& plan) {
  if (!plan.measured()) return std::nullopt;
  return planning::DecodeGroupRetuner(model_inputs(plan), plan.groups);
}

nlohmann::json with_retunes(const DecodeGroupPlan& plan, const std::vector<planning::DecodeGroupRetune>& retunes,
                            const std::vector<planning::DecodeGroupTrial>& trials) {
  nlohmann::json j = plan.to_json();
  nlohmann::json list = nlohmann::json::array();
  for (const planning::DecodeGroupRetune& r : retunes) {
    nlohmann::json e = {{"at_live", r.at_live}, {"from", r.from}, {"to", r.to}, {"why", r.measured ? "measured" : "live"}};
    if (r.measured) {
      e["from_steps_per_s"] = r.from_rate;
      e["to_steps_per_s"] = r.to_rate;
    }
    list.push_back(e);
  }
  j["retunes"] = list;
  nlohmann::json windows = nlohmann::json::array();
  for (const planning::DecodeGroupTrial& t : trials) windows.push_back({{"groups", t.groups}, {"steps_per_s", t.steps_per_second}});
  j["trials"] = windows;
  return j;
}

}  // namespace glacier::planning
