// The measured split's two steps. Speeds travel as exact doubles, so every rank plans from the very
// same figures; the result is checked to be the same split on every rank.
#include "app/measured_split.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "app/trace_speeds.h"
#include "planning/calibration.h"
#include "planning/partition_choice.h"
#include "planning/speed_split.h"
#include "util/error.h"
#include "util/log.h"

namespace glacier::app {
namespace {

// Doubles through the channel's int64 allgather: the bits travel unchanged.
std::vector<double> allgather_doubles(comm::Channel& ch, double value) {
  std::vector<double> out;
  for (int64_t bits : ch.allgather(std::bit_cast<int64_t>(value))) out.push_back(std::bit_cast<double>(bits));
  return out;
}

// Rank 0's doubles, on every rank (collective).
std::vector<double> doubles_from_rank0(comm::Channel& ch, const std::vector<double>& values) {
  std::string bytes;
  if (ch.rank() == 0) bytes.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
  const std::string all = ch.allgather_strings(bytes)[0];
  std::vector<double> out(all.size() / sizeof(double));
  std::memcpy(out.data(), all.data(), out.size() * sizeof(double));
  return out;
}

}  // namespace

std::vector<double> measure_speeds(const JobOptions& o, comm::Channel& ch, const SplitSetting& set, ThreadPool& pool,
                                   const compute::ComputeThrottle& throttle) {
  if (!o.partition_from.empty()) {
    if (ch.rank() != 0) return {};
    return speeds_from_trace(o.partition_from, read_earlier_run(o.partition_from), set.shape.bytes, ch.size());
  }
  const int32_t layer = set.provisional[static_cast<size_t>(set.stage_index)].first;
  const planning::Calibration cal =
      planning::calibrate_rank(*set.file, set.shape.cfg, set.shape.bytes, layer, set.shape.ubatch, pool, throttle);
  GLACIER_LOG_DEBUG("calibration: %d tokens through layer %d (%.1f MiB) in %s", cal.tokens, cal.layer,
                    cal.layer_bytes / 1048576.0, planning::format_seconds(cal.seconds).c_str());
  return {cal.seconds_per_work()};
}

std::vector<model::LayerRange> choose_measured_split(const JobOptions& o, comm::Channel& ch, const SplitSetting& set,
                                                     const std::vector<double>& measured) {
  const std::vector<double> rank_speeds =
      o.partition_from.empty() ? allgather_doubles(ch, measured.at(0)) : doubles_from_rank0(ch, measured);
  const planning::SpeedSplit decided =
      planning::plan_speed_split(set.shape, rank_speeds, set.n_stages, set.hosts, set.host_available);
  if (!decided.plan) {
    // As for the memory split: no split within every rank's share, so keep the one the hosts' check passed.
    if (ch.rank() == 0)
      GLACIER_LOG_WARN("--partition measured: %s; keeping the layer split %s", decided.no_split.c_str(),
                       planning::format_layer_split(set.provisional).c_str());
    return set.provisional;
  }
  const planning::PartitionPlan& plan = *decided.plan;
  const std::vector<double>& stage_speeds = decided.stage_speeds;
  const std::vector<std::string> agreed = ch.allgather_strings(planning::format_layer_split(plan.split));
  for (const std::string& a : agreed) GLACIER_ASSERT(a == agreed[0], "every rank planned the same split");
  if (auto error = planning::check_memory_fit(o.model, set.shape, plan.split, set.hosts, set.host_available))
    throw InputError(*error);
  if (ch.rank() == 0) {
    const std::string source = o.partition_from.empty()
                                   ? "calibrated on " +
                                         std::to_string(planning::calibration_tokens(set.shape.ubatch)) +
                                         " tokens through one layer"
                                   : "speeds from the trace in " + o.partition_from;
    const auto bytes_split = planning::partition_by_bytes(set.shape.bytes, set.n_stages);
    const std::string line =
        planning::describe_speed_split(source, plan, rank_speeds, bytes_split,
                                       planning::predicted_stage_times(set.shape.bytes, bytes_split, stage_speeds));
    GLACIER_LOG_INFO("%s", line.c_str());
  }
  return plan.split;
}

}  // namespace glacier::app
