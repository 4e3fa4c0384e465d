// --partition measured's decision on plain figures: from every rank's measured speed to the split that
// makes the slowest stage fastest within every stage's memory cap, or the reason no split does.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "planning/memory_fit.h"
#include "planning/partition.h"

namespace glacier::planning {

struct SpeedSplit {
  std::vector<double> stage_speeds;             // seconds per work per token: each stage's slowest rank
  std::optional<planning::PartitionPlan> plan;  // nullopt when no split keeps every stage within its cap
  std::string no_split;                         // then the planner's reason
};

// `rank_speeds` has one figure per world rank (rank r runs stage r % n_stages); `hosts` and
// `host_available` one entry per world rank, as for check_memory_fit.
SpeedSplit plan_speed_split(const MemoryShape& shape, const std::vector<double>& rank_speeds, int n_stages,
                            const std::vector<std::string>& hosts, const std::vector<uint64_t>& host_available);

}  // namespace glacier::planning
