// Whether the ranks' shards fit the memory of the hosts they run on, checked before any weight is read:
// a model that does not fit is refused with the number of ranks that would hold it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/model_weights.h"

namespace glacier::planning {

// What one rank will hold: its weights (mapped file pages that must stay resident to run at speed),
// its KV cache at the smallest useful slot count, and its working buffers (for a pipeline's first stage,
// which drives it, also a send and a return buffer for every micro-batch in flight).
struct RankMemoryNeed {
  uint64_t weights = 0;
  uint64_t kv_cache = 0;
  uint64_t buffers = 0;
  uint64_t total() const { return weights + kv_cache + buffers; }
};

// The job's shape as far as memory is concerned.
struct MemoryShape {
  model::ModelConfig cfg;
  model::WeightBytes bytes;
  int32_t min_slots = 1;  // --slots when given, else one sequence: the least a stage can run with
  int32_t n_ctx = 0;
  int32_t ubatch = 0;
  int32_t decode_groups = 0;  // --decode-groups (0 or auto = one a stage: auto stays within the 2 a stage counted)
  // The driver's send and result buffers for one micro-batch in flight (the wire's largest forward and
  // back messages at --ubatch tokens: the app asks the pipeline module, which owns the wire format).
  uint64_t ring_bytes_per_micro_batch = 0;
};

// The shape from the options: --slots (0 when not given) and --decode-groups (a count, 0, or negative for
// auto); each decode group needs a sequence of its own, so the slots counted are at least the groups.
MemoryShape memory_shape(const model::ModelConfig& cfg, const model::WeightBytes& bytes, int32_t n_ctx, int32_t ubatch,
                         int32_t slots_option, int32_t decode_groups_option, uint64_t ring_bytes_per_micro_batch = 0);

// Micro-batches a pipeline's driver keeps in flight (the scheduler's bound): enough to fill and overlap
// every stage, or --decode-groups when that is more; one on a single stage, which computes as it submits.
int32_t micro_batches_in_flight(int32_t decode_groups, int n_stages);

// n_stages: stages of the pipeline the rank belongs to (its first stage holds the in-flight buffers).
RankMemoryNeed rank_memory_need(const MemoryShape& shape, model::LayerRange layers, bool first, bool last,
                                int n_stages = 1);

// rank_memory_need split into what a stage needs per layer it holds and what it needs whatever it holds
// (the layer planner's memory model): need(stage s, layers) = stage_fixed[s] + sum of per_layer over them.
struct StageMemoryModel {
  std::vector<uint64_t> per_layer;
  std::vector<uint64_t> stage_fixed;
};
StageMemoryModel stage_memory_model(const MemoryShape& shape, int n_stages);

// The memory each rank may use: its host's figure shared equally among the ranks on that host (as the
// KV slots are sized). `hosts` and `host_available` have one entry per rank, as for check_memory_fit.
std::vector<uint64_t> rank_memory_caps(const std::vector<std::string>& hosts, const std::vector<uint64_t>& host_available);

// Every rank's need, host name and the memory its host offers (the smallest any rank of the host
// measured). `split` is one pipeline's layer split; `hosts` has one entry per rank of the job, and rank r
// runs stage r % split.size() (pipeline replicas repeat the split). Returns the refusal message naming the most
// overcommitted host and the smallest rank count of the byte-balanced split that would fit, or nullopt.
std::optional<std::string> check_memory_fit(const std::string& model_path, const MemoryShape& shape,
                                            const std::vector<model::LayerRange>& split,
                                            const std::vector<std::string>& hosts,
                                            const std::vector<uint64_t>& host_available);

}  // namespace glacier::planning
