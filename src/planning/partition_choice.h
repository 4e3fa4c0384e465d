// The inputs of the layer planner (planning::plan_partition) for --partition memory and measured: the
// work and memory model of a stage, per-stage figures from per-rank ones, and the lines rank 0 logs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "planning/memory_fit.h"
#include "planning/partition.h"

namespace glacier::planning {

// A stage's work in the speed model: its layers' weight bytes, plus the output head on the last stage
// (the byte-balanced split's measure: layers are matrix products over all their weights; the embedding
// is only looked up).
double stage_work(const model::WeightBytes& bytes, model::LayerRange layers, bool last);

// Stage s of a pipeline of n_stages stages runs on world ranks s, s + n_stages, ... (one per replica,
// which all share the split): a stage is as slow as its slowest rank and holds what its tightest holds.
std::vector<double> slowest_per_stage(const std::vector<double>& per_rank, int n_stages);
std::vector<uint64_t> tightest_per_stage(const std::vector<uint64_t>& per_rank, int n_stages);
// What each stage may use: the tightest share of host memory (rank_memory_caps) among its ranks.
std::vector<uint64_t> stage_memory_caps(const std::vector<std::string>& hosts, const std::vector<uint64_t>& host_available,
                                        int n_stages);

// --partition memory: the split that minimizes the largest need / available over the stages (shards in
// proportion to the ranks' memory). Throws InputError when no split keeps every stage within its cap.
planning::PartitionPlan memory_partition(const MemoryShape& shape, const std::vector<uint64_t>& stage_caps);

// --partition measured: the split that minimizes the slowest stage's predicted compute time, from each
// stage's seconds per unit of stage_work per token, within every stage's memory cap (InputError if none).
planning::PartitionPlan speed_partition(const MemoryShape& shape, const std::vector<double>& stage_seconds_per_work,
                                        const std::vector<uint64_t>& stage_caps);

// The same model's prediction for any split (seconds per token of a micro-batch, one per stage).
std::vector<double> predicted_stage_times(const model::WeightBytes& bytes, const std::vector<model::LayerRange>& split,
                                          const std::vector<double>& stage_seconds_per_work);

// "12.3 us", "4.56 ms", "1.23 s": the log's unit for predicted stage times.
std::string format_seconds(double seconds);

// Rank 0's log line for a measured split: the ranks' relative speeds, the predicted time of every stage,
// and what the byte-balanced split would predict, for comparison.
std::string describe_speed_split(const std::string& source, const planning::PartitionPlan& plan,
                                 const std::vector<double>& rank_seconds_per_work,
                                 const std::vector<model::LayerRange>& bytes_split,
                                 const std::vector<double>& bytes_split_times);

}  // namespace glacier::planning
