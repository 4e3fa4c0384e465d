// Test harness without a tokenizer: one process, the model's layers on one or more stages (a pipeline
// split run in sequence), for token-id prompts. Used where the vocabulary has no tokenizer yet.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compute/microbatch.h"
#include "compute/transformer_stage.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "util/thread_pool.h"

namespace glacier::testing {

struct StageHarness {
  // split: the stages' layer ranges in order (empty: one stage with every layer).
  explicit StageHarness(const std::string& path, std::vector<model::LayerRange> split = {}, int32_t ubatch = 512,
                        int32_t slots = 4, int32_t ctx = 256);

  // Logits of every row of a micro-batch: [n_tokens x n_vocab].
  std::vector<float> logits(const compute::MicroBatch& mb);
  // Greedy generation through the scheduler and a local ring (single stage only); a sequence stops
  // after an id in `eog`, which is kept in its output.
  std::vector<std::vector<int32_t>> greedy(const std::vector<std::vector<int32_t>>& prompts, int32_t n_tokens,
                                           const std::set<int32_t>& eog);

  std::unique_ptr<gguf::File> file;
  model::ModelConfig cfg;
  std::unique_ptr<ThreadPool> pool;
  std::vector<std::unique_ptr<compute::TransformerStage>> stages;
  int32_t n_slots = 0;
  int32_t n_ctx = 0;
};

// A prompt for the split checks: BOS (id 1), then n ids from `first` on in steps of `step`.
std::vector<int32_t> bos_ramp(int32_t n, int32_t first, int32_t step);

// A micro-batch of whole prompts, prompt i in slot i from position 0, no outputs requested.
compute::MicroBatch prompts_batch(const std::vector<std::vector<int32_t>>& prompts);

// GoogleTest expectation: the model at `path` split into the stages `split` gives the logits of every row of
// `prompts` (one micro-batch) bit for bit as one stage holding every layer.
void expect_split_equals_one_stage(const std::string& path, const std::vector<model::LayerRange>& split,
                                   const std::vector<std::vector<int32_t>>& prompts);

}  // namespace glacier::testing
