// Speeds from a trace: the sum of each rank's compute intervals (the same micro-batches pass every stage
// of a pipeline, so per token the stages' times compare directly; dividing by tokens also makes ranks of
// different replicas comparable).
#include "app/trace_speeds.h"

#include <algorithm>
#include <map>
#include <variant>

#include "io/hdf5_results.h"
#include "io/hdf5_trace.h"
#include "planning/partition.h"
#include "planning/partition_choice.h"
#include "util/error.h"

namespace glacier::app {
namespace {

std::string where(const std::string& path) { return "option --partition-from " + path + ": "; }

}  // namespace

EarlierRun read_earlier_run(const std::string& path) {
  EarlierRun run;
  std::map<std::string, io::AttributeValue> attrs;
  try {
    attrs = io::read_root_attributes(path);
    run.rows = io::read_trace(path);
  } catch (const InputError& e) {
    throw InputError(where(path) + e.what());
  }
  auto split = attrs.find("layer_split");
  if (split == attrs.end() || !std::holds_alternative<std::string>(split->second))
    throw InputError(where(path) + "expected a root attribute layer_split (written by glacier_mpi --out in generate or "
                                   "score mode), found none");
  auto ranks = attrs.find("ranks");
  if (ranks == attrs.end() || !std::holds_alternative<int64_t>(ranks->second))
    throw InputError(where(path) + "expected a root attribute ranks (written by glacier_mpi --out), found none");
  run.layer_split = std::get<std::string>(split->second);
  run.ranks = std::get<int64_t>(ranks->second);
  return run;
}

std::vector<double> speeds_from_trace(const std::string& path, const EarlierRun& run, const model::WeightBytes& bytes,
                                      int world) {
  if (run.ranks != world)
    throw InputError(where(path) + "expected a run on the same " + std::to_string(world) +
                     " ranks as this job (speeds belong to ranks), found a run on " + std::to_string(run.ranks));
  const int32_t n_layer = static_cast<int32_t>(bytes.per_layer.size());
  const int stages = static_cast<int>(std::count(run.layer_split.begin(), run.layer_split.end(), ',')) + 1;
  std::vector<model::LayerRange> split;
  try {
    split = planning::parse_layer_split(run.layer_split, n_layer, stages);
  } catch (const InputError&) {
    split.clear();
  }
  if (split.empty() || world % stages != 0)
    throw InputError(where(path) + "expected a layer_split of this model's " + std::to_string(n_layer) +
                     " layers over a divisor of " + std::to_string(world) + " ranks, found '" + run.layer_split +
                     "' (a run of another model?)");
  std::vector<double> seconds(static_cast<size_t>(world), 0.0);
  std::vector<int64_t> tokens(static_cast<size_t>(world), 0);
  for (const io::TraceRow& row : run.rows) {
    if (!io::is_compute_phase(row.phase)) continue;
    if (row.rank < 0 || row.rank >= world)
      throw InputError(where(path) + "expected trace rows of ranks 0.." + std::to_string(world - 1) +
                       ", found one of rank " + std::to_string(row.rank));
    seconds[static_cast<size_t>(row.rank)] += std::max(0.0, row.end - row.start);
    tokens[static_cast<size_t>(row.rank)] += row.tokens;
  }
  std::vector<double> speeds;
  for (int r = 0; r < world; ++r) {
    const int stage = r % stages;
    const double work = planning::stage_work(bytes, split[static_cast<size_t>(stage)], stage == stages - 1);
    if (!(seconds[static_cast<size_t>(r)] > 0.0) || tokens[static_cast<size_t>(r)] <= 0 || !(work > 0.0))
      throw InputError(where(path) + "expected compute intervals of rank " + std::to_string(r) +
                       " in /trace, found none (did its replica get no work?)");
    speeds.push_back(seconds[static_cast<size_t>(r)] / (work * static_cast<double>(tokens[static_cast<size_t>(r)])));
  }
  return speeds;
}

}  // namespace glacier::app
