// --decode-groups auto's measurements: a hop (comm/ring_timing) and this stage's decode step at a few
// row counts, every stage timing the same row count at once; the choice from them is planning's.
#include "app/decode_group_tuning.h"

#include <algorithm>
#include <cmath>

#include "comm/ring_timing.h"
#include "comm/startup_watchdog.h"
#include "compute/decode_batch.h"
#include "pipeline/wire.h"
#include "util/clock.h"
#include "util/log.h"

namespace glacier::app {
namespace {

// Wall seconds of one decode step of `rows` sequences (one token each, slots 0..rows-1, position 0)
// through this stage: the embedding on the first, the layers, the head on the last.
double time_decode_step(compute::TransformerStage& stage, int32_t rows, const compute::ComputeThrottle& throttle) {
  const model::ModelConfig& cfg = stage.config();
  compute::MicroBatch mb = compute::one_token_rows(rows, 0, compute::OutputKind::None);
  mb.id = -1;
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

planning::DecodeGroupPlan plan_decode_groups(const JobOptions& o, comm::Channel& pipe, compute::TransformerStage& stage,
                                             int32_t slots, const compute::ComputeThrottle& throttle) {
  const int n_stages = pipe.size();
  const planning::DecodeGroupRequest req{o.decode_groups == kDecodeGroupsAuto, o.decode_groups, o.mode == JobMode::Generate,
                                         option_word(o.mode)};
  planning::DecodeGroupStart start = planning::start_decode_group_plan(req, n_stages, slots);
  if (!start.to_time) return start.plan;
  const int32_t largest = planning::largest_timed_rows(slots, n_stages, stage.max_tokens());
  const double hop_seconds =
      comm::ring_hop_seconds(pipe, pipeline::max_forward_bytes(largest, stage.config().n_embd), kRingTrips);
  planning::StageStepCosts mine;
  for (int32_t rows : planning::rows_to_time(largest)) {
    comm::startup::progress("decode step of " + std::to_string(rows) + " rows");
    pipe.barrier();  // every stage times the same step at once, sharing the host as in the run
    mine.rows.push_back(rows);
    mine.seconds.push_back(time_decode_step(stage, rows, throttle));
  }
  // Every rank learns every stage's times (nanoseconds: the channel gathers integers) and so the choice.
  std::vector<planning::StageStepCosts> measured(static_cast<size_t>(n_stages), planning::StageStepCosts{mine.rows, {}});
  for (double t : mine.seconds) {
    const std::vector<int64_t> all = pipe.allgather(static_cast<int64_t>(std::llround(t * 1e9)));
    for (int s = 0; s < n_stages; ++s)
      measured[static_cast<size_t>(s)].seconds.push_back(static_cast<double>(all[static_cast<size_t>(s)]) * 1e-9);
  }
  planning::choose_from_timings(start.plan, hop_seconds, std::move(measured));
  return start.plan;
}

void retune_between_waves(pipeline::Scheduler& sched, planning::DecodeGroupRetuner& r) {
  sched.set_decode_groups_policy([&r](const pipeline::Scheduler::DecodeGroupsQuery& q) {
    const size_t known = r.retunes().size();
    const int32_t use = r.groups_for(planning::DecodeProgress{q.live, q.decode_steps_sent, q.prompt_tokens_sent, now_seconds()});
    for (size_t i = known; i < r.retunes().size(); ++i) {
      const planning::DecodeGroupRetune& t = r.retunes()[i];
      if (t.measured) {
        GLACIER_LOG_INFO("decode groups re-tuned by measurement at %d live sequences: %d -> %d (%.4g -> %.4g decode steps/s)",
                         t.at_live, t.from, t.to, t.from_rate, t.to_rate);
      } else {
        GLACIER_LOG_INFO("decode groups re-tuned for %d live sequences: %d -> %d", t.at_live, t.from, t.to);
      }
    }
    return use;
  });
}

}  // namespace glacier::app
