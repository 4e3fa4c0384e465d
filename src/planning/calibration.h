// --partition measured: times how fast this rank computes, on one calibration micro-batch through one of
// the model's own layers, before the rank's shard is mapped (so a measured split never needs a remap).
//
// Why this design: a rank maps only its own layers, and which layers those are is what the measurement
// decides. So each rank times a workload that does not depend on the final split: kCalibrationTokens
// tokens (at most --ubatch) of one prompt through one real layer (its first layer under the provisional
// split), on a throw-away one-layer stage with its own small KV cache, with the rank's own threads and
// binding. The layers of these models have equal shapes, so a layer's time divided by its weight bytes
// and tokens is the rank's speed for any layer; the split is then planned from every rank's speed x
// each stage's weight bytes, and only then are the final shards loaded.
//
// Time is the calling thread's CPU time (it computes its share, then spins and yields until the other
// threads are done), not wall time: on this project's shared 2-core VM, other processes taking the cores for
// milliseconds at a time made the wall-time ratio of a rank slowed 3x to its peer range from 1.35 to
// 8.25 over ten runs, the CPU-time ratio from 2.8 to 3.6. CPU time measures the machine.
// A rank whose host is persistently shared shows in a trace's wall times instead (--partition-from).
// --slow-rank's factor multiplies the time, as its sleep lengthens every compute interval of the run.
#pragma once
#include <cstdint>

#include "compute/compute_throttle.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "util/thread_pool.h"

namespace glacier::planning {

// Tokens of the calibration micro-batch: enough rows for the matrix products to run as in prefill, few
// enough that a layer of a 70B model takes well under a second.
constexpr int32_t kCalibrationTokens = 64;
// Timed repetitions after one untimed warm-up (which faults the layer's pages in); the fastest counts,
// as interference (cache, memory bandwidth) only ever adds time.
constexpr int kCalibrationRuns = 3;

// The calibration micro-batch's tokens at --ubatch: kCalibrationTokens, fewer when a micro-batch is smaller.
int32_t calibration_tokens(int32_t ubatch);

struct Calibration {
  int32_t layer = 0;
  int32_t tokens = 0;
  uint64_t layer_bytes = 0;
  double seconds = 0.0;  // the fastest timed run's CPU seconds, x --slow-rank's factor
  // The rank's speed: seconds per weight byte per token.
  double seconds_per_work() const;
};

// Throws InputError (from load_shard) when the layer's tensors are unusable.
Calibration calibrate_rank(const gguf::File& file, const model::ModelConfig& cfg, const model::WeightBytes& bytes,
                           int32_t layer, int32_t ubatch, ThreadPool& pool, const compute::ComputeThrottle& throttle);

}  // namespace glacier::planning
