// The calibration run: a one-layer TransformerStage over one KV slot, fed a fixed synthetic hidden state
// (the values do not change the time: every product runs over all the weights whatever they are),
// timed in the calling thread's CPU seconds.
#include "planning/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "compute/transformer_stage.h"
#include "util/clock.h"

namespace glacier::planning {

double Calibration::seconds_per_work() const {
  return seconds / (static_cast<double>(std::max<uint64_t>(layer_bytes, 1)) * std::max(tokens, 1));
}

int32_t calibration_tokens(int32_t ubatch) { return std::max(1, std::min(ubatch, kCalibrationTokens)); }

Calibration calibrate_rank(const gguf::File& file, const model::ModelConfig& cfg, const model::WeightBytes& bytes,
                           int32_t layer, int32_t ubatch, ThreadPool& pool, const compute::ComputeThrottle& throttle) {
  Calibration cal;
  cal.layer = layer;
  cal.tokens = calibration_tokens(ubatch);
  cal.layer_bytes = bytes.per_layer[static_cast<size_t>(layer)];
  model::ShardWeights shard = model::load_shard(file, cfg, {layer, layer + 1}, false, false, &pool);
  compute::TransformerStage stage(cfg, std::move(shard), 1, cal.tokens, cal.tokens, pool);

  compute::MicroBatch mb;
  mb.id = -1;
  compute::Chunk chunk;
  chunk.n_tokens = cal.tokens;
  mb.chunks.push_back(chunk);
  mb.tokens.assign(static_cast<size_t>(cal.tokens), 0);
  mb.targets.assign(static_cast<size_t>(cal.tokens), -1);
  const size_t n = static_cast<size_t>(cal.tokens) * static_cast<size_t>(cfg.n_embd);
  std::vector<float> input(n), x(n);
  for (size_t i = 0; i < n; ++i) input[i] = std::sin(0.37f * static_cast<float>(i % 1024));  // O(1), finite

  auto run = [&] {
    std::copy(input.begin(), input.end(), x.begin());
    const double t0 = thread_cpu_seconds();
    stage.run_layers(mb, x.data());
    return (thread_cpu_seconds() - t0) * throttle.factor();
  };
  run();  // warm-up
  cal.seconds = std::numeric_limits<double>::infinity();
  for (int i = 0; i < kCalibrationRuns; ++i) cal.seconds = std::min(cal.seconds, run());
  return cal;
}

}  // namespace glacier::planning
