// The job's layout on plain figures: how many pipeline replicas, which layers each stage holds, where a
// rank sits, how many KV slots it keeps; refused (InputError) when the options cannot be honoured or
// the model does not fit its hosts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "planning/memory_fit.h"

namespace glacier::planning {

constexpr int32_t kDefaultMaxCtx = 4096;  // a longer context must be asked for with --ctx
constexpr int32_t kDefaultSlots = 32;     // enough sequences in flight for batched decode

// Each host's memory as its most pessimistic rank measured it, by world rank.
struct HostMemory {
  std::vector<std::string> hosts;
  std::vector<uint64_t> available;
};
// From every world rank's host name and memory budget: each rank gets the smallest budget of its host.
HostMemory host_memory(const std::vector<std::string>& hosts, const std::vector<uint64_t>& budgets);

// --partition: balance weight bytes, follow each rank's memory, or time each rank (calibration).
enum class Partition { Bytes, Memory, Measured };

// The options that choose the split.
struct SplitRequest {
  std::vector<model::LayerRange> layers;  // --layers, empty when not given
  Partition partition = Partition::Bytes;
  int replicas = 0;                // --replicas, 0 for auto
};

// The split by hand, by bytes, or in proportion to memory. --partition measured starts from the memory
// split too: its calibration layer and the memory check before calibrating come from it. When no split
// keeps every rank within its share of its host, the byte-balanced split stands in and the hosts' check
// (which lets ranks of one host share unevenly) decides. Throws InputError for more stages than layers
// or a --layers that does not fit.
std::vector<model::LayerRange> layer_split(const SplitRequest& req, const MemoryShape& shape, int n_stages,
                                           const HostMemory& mem);

// --replicas auto: the shortest pipeline (a divisor of the rank count) whose shards fit every host; one
// pipeline over every rank when nothing fits (refused then by plan_layout with the full explanation).
int auto_replicas(const SplitRequest& req, const std::string& model_path, const MemoryShape& shape,
                  const HostMemory& mem, int world);

struct Layout {
  int replicas = 1;
  int n_stages = 1;                      // ranks per replica
  std::vector<model::LayerRange> split;  // one range per stage
  int replica_of(int rank) const { return rank / n_stages; }
  int stage_of(int rank) const { return rank % n_stages; }
};

// Replicas and split for `world` ranks; `fixed_split` (a shard set's, or empty) fixes both. Throws
// InputError when the replicas do not divide the ranks, the split cannot be made, or the model's shards
// do not fit their hosts (check_memory_fit's message).
Layout plan_layout(const SplitRequest& req, const std::string& model_path, const MemoryShape& shape,
                   const HostMemory& mem, int world, const std::vector<model::LayerRange>& fixed_split = {});

// A shard set of `set_stages` stages fixes the split and so the replicas (ranks / stages): options that
// would choose them otherwise are refused rather than ignored (InputError naming them). `model_path` is
// the set's directory (--model). `world`: the ring's ranks, the job's over `expert_parallel` (each ring rank
// leads that many members, every one opening its leader's stage).
void check_fixed_split_options(const SplitRequest& req, const std::string& partition_from,
                               const std::string& model_path, int set_stages, int world, int expert_parallel = 1);

// Each stage's memory need as a percentage of its memory cap (the tightest share of host memory among its
// ranks), and whether every stage is within its cap: the memory split's log line.
struct StageFill {
  std::vector<double> percent;
  bool within = true;
};
StageFill stage_fill(const MemoryShape& shape, const std::vector<model::LayerRange>& split, const HostMemory& mem);

// KV slots when --slots is not given: what half of the rank's memory budget holds, from one to kDefaultSlots.
int32_t default_slots(const model::ModelConfig& cfg, model::LayerRange layers, int32_t n_ctx, uint64_t budget);

}  // namespace glacier::planning
