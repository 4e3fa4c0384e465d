// The measured split's decision: per-stage speeds and caps from per-rank ones, then the speed planner;
// the planner's refusal (InputError) becomes a value, as the caller keeps its provisional split then.
#include "planning/speed_split.h"

#include "planning/partition_choice.h"
#include "util/error.h"

namespace glacier::planning {

SpeedSplit plan_speed_split(const MemoryShape& shape, const std::vector<double>& rank_speeds, int n_stages,
                            const std::vector<std::string>& hosts, const std::vector<uint64_t>& host_available) {
  SpeedSplit out;
  out.stage_speeds = slowest_per_stage(rank_speeds, n_stages);
  try {
    out.plan = speed_partition(shape, out.stage_speeds, stage_memory_caps(hosts, host_available, n_stages));
  } catch (const InputError& e) {
    out.no_split = e.what();
  }
  return out;
}

}  // namespace glacier::planning
