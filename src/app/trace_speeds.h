// --partition-from R.h5: each rank's compute speed from an earlier run's trace instead of a calibration:
// its compute seconds divided by the work it held (stage_work of its layers) and the tokens it computed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/result_record.h"
#include "model/model_weights.h"

namespace glacier::app {

// What an earlier run's results file says about its ranks.
struct EarlierRun {
  std::vector<io::TraceRow> rows;
  std::string layer_split;  // one pipeline's split, e.g. "0:5,5:8" (replicas repeat it over the ranks)
  int64_t ranks = 0;
};

// Reads /trace and the root attributes layer_split and ranks; InputError naming the file when it is
// not a results file, or lacks the trace or either attribute.
EarlierRun read_earlier_run(const std::string& path);

// Seconds per unit of stage_work per token for each of the `world` ranks (world rank r ran stage
// r % stages of the earlier split). The ranks are taken to be the same machines in the same order.
// InputError naming `path` when the earlier run had another rank count, a split that does not cover
// this model's layers, or a rank without compute intervals.
std::vector<double> speeds_from_trace(const std::string& path, const EarlierRun& run, const model::WeightBytes& bytes,
                                      int world);

}  // namespace glacier::app
