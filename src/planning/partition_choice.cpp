// Planner inputs: memory from stage_memory_model (so the planner's need is rank_memory_need exactly), work
// from weight bytes; for --partition memory the speed of a stage is 1 / its cap, so its "time" is the
// fraction of its memory it fills.
#include "planning/partition_choice.h"

#include <algorithm>
#include <cstdio>

#include "util/error.h"

namespace glacier::planning {
namespace {

planning::PartitionCosts base_costs(const MemoryShape& shape, const std::vector<uint64_t>& stage_caps) {
  const int n_stages = static_cast<int>(stage_caps.size());
  const StageMemoryModel m = stage_memory_model(shape, n_stages);
  planning::PartitionCosts c;
  c.layer_memory = m.per_layer;
  c.stage_fixed_memory = m.stage_fixed;
  c.stage_memory_cap = stage_caps;
  return c;
}

}  // namespace

double stage_work(const model::WeightBytes& bytes, model::LayerRange layers, bool last) {
  double work = last ? static_cast<double>(bytes.head) : 0.0;
  for (int32_t l = layers.first; l < layers.last; ++l) work += static_cast<double>(bytes.per_layer[static_cast<size_t>(l)]);
  return work;
}

std::vector<double> slowest_per_stage(const std::vector<double>& per_rank, int n_stages) {
  std::vector<double> out(static_cast<size_t>(n_stages), 0.0);
  for (size_t r = 0; r < per_rank.size(); ++r) {
    double& v = out[r % static_cast<size_t>(n_stages)];
    v = std::max(v, per_rank[r]);
  }
  return out;
}

std::vector<uint64_t> tightest_per_stage(const std::vector<uint64_t>& per_rank, int n_stages) {
  std::vector<uint64_t> out(static_cast<size_t>(n_stages), UINT64_MAX);
  for (size_t r = 0; r < per_rank.size(); ++r) {
    uint64_t& v = out[r % static_cast<size_t>(n_stages)];
    v = std::min(v, per_rank[r]);
  }
  return out;
}

std::vector<uint64_t> stage_memory_caps(const std::vector<std::string>& hosts, const std::vector<uint64_t>& host_available,
                                        int n_stages) {
  return tightest_per_stage(rank_memory_caps(hosts, host_available), n_stages);
}

planning::PartitionPlan memory_partition(const MemoryShape& shape, const std::vector<uint64_t>& stage_caps) {
  planning::PartitionCosts c = base_costs(shape, stage_caps);
  c.layer_work.assign(c.layer_memory.begin(), c.layer_memory.end());
  c.stage_fixed_work.assign(c.stage_fixed_memory.begin(), c.stage_fixed_memory.end());
  for (uint64_t cap : stage_caps) c.stage_seconds_per_work.push_back(1.0 / static_cast<double>(std::max<uint64_t>(cap, 1)));
  return planning::plan_partition(c);
}

planning::PartitionPlan speed_partition(const MemoryShape& shape, const std::vector<double>& stage_seconds_per_work,
                                        const std::vector<uint64_t>& stage_caps) {
  GLACIER_ASSERT(stage_seconds_per_work.size() == stage_caps.size(), "one speed and one cap per stage");
  planning::PartitionCosts c = base_costs(shape, stage_caps);
  for (uint64_t b : shape.bytes.per_layer) c.layer_work.push_back(static_cast<double>(b));
  c.stage_fixed_work.assign(stage_caps.size(), 0.0);
  c.stage_fixed_work.back() = static_cast<double>(shape.bytes.head);
  c.stage_seconds_per_work = stage_seconds_per_work;
  return planning::plan_partition(c);
}

std::vector<double> predicted_stage_times(const model::WeightBytes& bytes, const std::vector<model::LayerRange>& split,
                                          const std::vector<double>& stage_seconds_per_work) {
  std::vector<double> out;
  for (size_t s = 0; s < split.size(); ++s)
    out.push_back(stage_seconds_per_work[s] * stage_work(bytes, split[s], s + 1 == split.size()));
  return out;
}

std::string format_seconds(double seconds) {
  char buf[32];
  if (seconds >= 1.0)
    std::snprintf(buf, sizeof buf, "%.3g s", seconds);
  else if (seconds >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3g ms", seconds * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3g us", seconds * 1e6);
  return buf;
}

std::string describe_speed_split(const std::string& source, const planning::PartitionPlan& plan,
                                 const std::vector<double>& rank_seconds_per_work,
                                 const std::vector<model::LayerRange>& bytes_split,
                                 const std::vector<double>& bytes_split_times) {
  auto list = [](const std::vector<double>& times) {
    std::string s;
    for (double t : times) {
      if (!s.empty()) s += ", ";
      s += format_seconds(t);
    }
    return s;
  };
  const double fastest = *std::min_element(rank_seconds_per_work.begin(), rank_seconds_per_work.end());
  std::string relative;
  for (double v : rank_seconds_per_work) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.2f", relative.empty() ? "" : ", ", fastest > 0 ? v / fastest : 1.0);
    relative += buf;
  }
  return "layer split " + planning::format_layer_split(plan.split) + " (--partition measured, " + source +
         "); compute time per weight byte relative to the fastest rank: " + relative +
         "; predicted compute per token by stage: " + list(plan.stage_time) + " (the byte-balanced split " +
         planning::format_layer_split(bytes_split) + ": " + list(bytes_split_times) + ")";
}

}  // namespace glacier::planning
