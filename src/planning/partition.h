// Layer partition across pipeline stages: contiguous, covering, non-empty ranges. By default the
// split minimizes the heaviest stage's weight bytes (the output head counts for the last stage: it is
// a matrix product every token; the embedding is only looked up, so it does not count). plan_partition
// is the general form for stages of unequal speed and memory (--partition memory|measured).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_weights.h"

namespace glacier::planning {

// Throws InputError when n_stages exceeds the layer count.
std::vector<model::LayerRange> partition_by_bytes(const model::WeightBytes& bytes, int n_stages);

// What the planner knows about one pipeline: the work of each layer and stage, each stage's speed, and
// the memory each layer and stage needs against what each stage may use. Vectors named stage_* have one
// entry per stage; layer_* one per layer.
struct PartitionCosts {
  std::vector<double> layer_work;              // e.g. weight bytes of each layer
  std::vector<double> stage_fixed_work;        // work a stage has whatever layers it holds (the head on the last)
  std::vector<double> stage_seconds_per_work;  // each stage's speed: its predicted time per unit of work
  std::vector<uint64_t> layer_memory;          // bytes a stage needs for each layer it holds (weights, KV)
  std::vector<uint64_t> stage_fixed_memory;    // bytes a stage needs whatever layers it holds (buffers, head)
  std::vector<uint64_t> stage_memory_cap;      // bytes each stage may use
};

struct PartitionPlan {
  std::vector<model::LayerRange> split;
  std::vector<double> stage_time;      // predicted: seconds_per_work x (fixed + layers' work)
  std::vector<uint64_t> stage_memory;  // fixed + layers' memory
  double bottleneck() const;           // the largest stage_time
};

// The contiguous split that minimizes the slowest stage's predicted time subject to every stage's memory
// need <= its cap (exact dynamic programme; ties go to earlier cuts, so equal inputs give equal splits on
// every rank). Throws InputError when there are more stages than layers, or when no split fits memory
// (saying how many layers each stage can hold at most).
PartitionPlan plan_partition(const PartitionCosts& costs);

// "--layers 0:2,2:5" as ranges (an empty text: none), checked only for its form: the option is read before
// the model is. Throws InputError naming the option, the expected and the found value.
std::vector<model::LayerRange> parse_layer_ranges(const std::string& spec);
// Checks a split against the model and the pipeline: one range per stage, contiguous from 0 to n_layer,
// each non-empty. Throws InputError as parse_layer_ranges does.
void check_layer_split(const std::vector<model::LayerRange>& split, int32_t n_layer, int n_stages);
// Both: a split as a results file or glacier_shard --layers gives it.
std::vector<model::LayerRange> parse_layer_split(const std::string& spec, int32_t n_layer, int n_stages);

// "0:2,2:5"
std::string format_layer_split(const std::vector<model::LayerRange>& split);

// Bytes each stage holds under a split (for logs and traces).
std::vector<uint64_t> stage_bytes(const model::WeightBytes& bytes, const std::vector<model::LayerRange>& split);

}  // namespace glacier::planning
