// --decode-groups auto's measurements: a hop (comm/ring_timing) and this stage's decode step at a few
// row counts, every stage timing the same row count at once; then the decode model's choice.
#include "app/decode_group_tuning.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/memory_fit.h"
#include "comm/ring_timing.h"
#include "comm/startup_watchdog.h"
#include "pipeline/wire.h"
#include "util/clock.h"
#include "util/log.h"

namespace glacier::app {
namespace {

// Row counts to time: powers of two up to the largest group auto can make, and that size itself.
std::vector<int32_t> rows_to_time(int32_t largest) {
  std::vector<int32_t> rows;
  for (int32_t r = 1; r < largest; r *= 2) rows.push_back(r);
  rows.push_back(largest);
  return rows;
}

// Wall seconds of one decode step of `rows` sequences (one token each, slots 0..rows-1, position 0)
// through this stage: the embedding on the first, the layers, the head on the last.
double time_decode_step(compute::TransformerStage& stage, int32_t rows, const pipeline::ComputeThrottle& throttle) {
  const model::ModelConfig& cfg = stage.config();
  compute::MicroBatch mb;
  mb.id = -1;
  for (int32_t i = 0; i < rows; ++i) {
    compute::Chunk c;
    c.seq = i;
    c.slot = i;
    c.n_tokens = 1;
    c.token_offset = i;
    mb.chunks.push_back(c);
  }
  mb.tokens.assign(static_cast<size_t>(rows), 0);
  mb.targets.assign(static_cast<size_t>(rows), -1);
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cfg.n_embd);
  std::vector<float> x(n);
  std::vector<int32_t> head_rows(static_cast<size_t>(rows));
  for (int32_t i = 0; i < rows; ++i) head_rows[static_cast<size_t>(i)] = i;
  std::vector<float> logits;
  if (stage.weights().has_head) logits.resize(static_cast<size_t>(rows) * static_cast<size_t>(cfg.n_vocab));
  auto step = [&] {
    if (stage.weights().has_embedding) {
      stage.embed(mb, x.data());
    } else {
      for (size_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i % 1024));  // O(1), finite
    }
    stage.run_layers(mb, x.data());
    if (stage.weights().has_head) stage.head(x.data(), head_rows, logits.data());
  };
  auto run = [&] {  // seconds a step, over steps for at least kDecodeStepRunSeconds
    const double t0 = now_seconds();
    int steps = 0;
    double elapsed = 0.0;
    do {
      step();
      comm::startup::tick();  // the start-up watchdog hears from this rank between steps
      ++steps;
      elapsed = now_seconds() - t0;
    } while (elapsed < kDecodeStepRunSeconds);
    return elapsed / steps * throttle.factor();
  };
  run();  // warm-up
  std::vector<double> times;
  for (int i = 0; i < kDecodeStepRuns; ++i) times.push_back(run());
  std::nth_element(times.begin(), times.begin() + kDecodeStepRuns / 2, times.end());
  return times[kDecodeStepRuns / 2];
}

}  // namespace

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

DecodeGroupPlan plan_decode_groups(const JobOptions& o, comm::Channel& pipe, compute::TransformerStage& stage,
                                   int32_t slots, const pipeline::ComputeThrottle& throttle) {
  DecodeGroupPlan plan;
  const int n_stages = pipe.size();
  plan.slots = slots;
  if (o.decode_groups != kDecodeGroupsAuto) {
    plan.groups = o.decode_groups > 0 ? o.decode_groups : n_stages;
    plan.rule = "--decode-groups " + std::to_string(o.decode_groups);
    return plan;
  }
  plan.groups = n_stages;
  plan.rule = "auto";
  if (n_stages == 1) {
    plan.rule += ": one stage computes each micro-batch as it is submitted";
    return plan;
  }
  if (o.mode != "generate") {
    plan.rule += ": --mode " + o.mode + " has no decode steps";
    return plan;
  }
  // At most the micro-batches in flight the memory check reserved for auto (micro_batches_in_flight(0)).
  plan.max_groups = std::min(slots, micro_batches_in_flight(0, n_stages));
  // A group's rows at one a stage (no more than a micro-batch holds).
  const int32_t largest = std::clamp((slots + n_stages - 1) / n_stages, 1, stage.max_tokens());
  plan.hop_seconds = comm::ring_hop_seconds(pipe, pipeline::max_forward_bytes(largest, stage.config().n_embd), kRingTrips);
  pipeline::StageStepCosts mine;
  for (int32_t rows : rows_to_time(largest)) {
    comm::startup::progress("decode step of " + std::to_string(rows) + " rows");
    pipe.barrier();  // every stage times the same step at once, sharing the host as in the run
    mine.rows.push_back(rows);
    mine.seconds.push_back(time_decode_step(stage, rows, throttle));
  }
  // Every rank learns every stage's times (nanoseconds: the channel gathers integers) and so the choice.
  plan.measured_steps.assign(static_cast<size_t>(n_stages), pipeline::StageStepCosts{mine.rows, {}});
  for (double t : mine.seconds) {
    const std::vector<int64_t> all = pipe.allgather(static_cast<int64_t>(std::llround(t * 1e9)));
    for (int s = 0; s < n_stages; ++s)
      plan.measured_steps[static_cast<size_t>(s)].seconds.push_back(static_cast<double>(all[static_cast<size_t>(s)]) * 1e-9);
  }
  for (const pipeline::StageStepCosts& m : plan.measured_steps) plan.stages.push_back(pipeline::linear_fit(m));
  pipeline::DecodeGroupInputs in;
  in.n_stages = n_stages;
  in.slots = slots;
  in.max_groups = plan.max_groups;
  in.hop_seconds = plan.hop_seconds;
  in.stages = plan.stages;
  plan.choice = pipeline::choose_decode_groups(in);
  plan.groups = plan.choice.groups;
  return plan;
}

std::optional<pipeline::DecodeGroupRetuner> make_retuner(const DecodeGroupPlan& plan) {
  if (!plan.measured()) return std::nullopt;
  pipeline::DecodeGroupInputs in;
  in.n_stages = static_cast<int32_t>(plan.stages.size());
  in.slots = plan.slots;
  in.max_groups = plan.max_groups;
  in.hop_seconds = plan.hop_seconds;
  in.stages = plan.stages;
  return pipeline::DecodeGroupRetuner(std::move(in), plan.groups);
}

void retune_between_waves(pipeline::Scheduler& sched, pipeline::DecodeGroupRetuner& r) {
  sched.set_decode_groups_policy([&r](int32_t live) {
    const int32_t before = r.groups();
    const int32_t now = r.groups_for(live);
    if (now != before)
      GLACIER_LOG_INFO("decode groups re-tuned for %d live sequences: %d -> %d", live, before, now);
    return now;
  });
}

nlohmann::json with_retunes(const DecodeGroupPlan& plan, const std::vector<pipeline::DecodeGroupRetune>& retunes) {
  nlohmann::json j = plan.to_json();
  nlohmann::json list = nlohmann::json::array();
  for (const pipeline::DecodeGroupRetune& r : retunes) list.push_back({{"at_live", r.at_live}, {"from", r.from}, {"to", r.to}});
  j["retunes"] = list;
  return j;
}

}  // namespace glacier::app
