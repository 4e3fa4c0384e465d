// --partition measured at start-up: each rank's speed (a calibration run, or an earlier run's trace with
// --partition-from), shared over the channel, and the split planned from it before any shard is loaded.
#pragma once
#include <string>
#include <vector>

#include "app/options.h"
#include "comm/channel.h"
#include "compute/compute_throttle.h"
#include "gguf/gguf_file.h"
#include "planning/memory_fit.h"
#include "util/thread_pool.h"

namespace glacier::app {

// What every rank knows of the job once replicas and the provisional split are chosen.
struct SplitSetting {
  const gguf::File* file = nullptr;
  planning::MemoryShape shape;
  std::vector<std::string> hosts;        // per world rank
  std::vector<uint64_t> host_available;  // per world rank: its host's memory
  int n_stages = 1;
  int stage_index = 0;
  std::vector<model::LayerRange> provisional;  // the memory split (calibration layers come from it)
};

// The local step (a failure on one rank is agreed on after it): this rank's seconds per weight byte per
// token from a calibration run; with --partition-from, rank 0 returns every rank's from the trace and
// the others nothing.
std::vector<double> measure_speeds(const JobOptions& o, comm::Channel& ch, const SplitSetting& set, ThreadPool& pool,
                                   const compute::ComputeThrottle& throttle);

// The collective step (every rank computes the same from the same figures): the split that makes the
// slowest stage fastest within every rank's memory share, logged on rank 0. When no split keeps every
// rank within its share, the provisional split stays (with a warning). Throws InputError when the
// chosen split does not fit the hosts.
std::vector<model::LayerRange> choose_measured_split(const JobOptions& o, comm::Channel& ch, const SplitSetting& set,
                                                     const std::vector<double>& measured);

}  // namespace glacier::app
