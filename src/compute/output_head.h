// The last stage's output work on a micro-batch: logits for the rows that need them (the last row of
// a generate chunk, every row of a speculative verify chunk, every row with a target when scoring),
// then sampling or scoring. Rows go through
// the head in groups of a bounded size so a 32k-vocabulary logits buffer stays small.
#pragma once
#include <vector>

#include "compute/logits_processing.h"
#include "compute/microbatch.h"
#include "compute/sampler.h"
#include "compute/transformer_stage.h"

namespace glacier::compute {

class OutputHead {
 public:
  explicit OutputHead(TransformerStage& stage);
  // x: the micro-batch's activations after the last layer. Fills `out` (cleared first).
  void evaluate(const MicroBatch& mb, const float* x, MicroBatchResult& out);

 private:
  static constexpr int32_t kRowsPerGroup = 16;  // bounds the logits buffer to 16 x n_vocab floats
  TransformerStage& stage_;
  Sampler sampler_;
  SlotLogitStates slot_states_;  // logit_bias, min_tokens ids and token counts per KV slot
  std::vector<float> logits_;
  std::vector<int32_t> rows_, row_chunk_, group_;
};

}  // namespace glacier::compute
