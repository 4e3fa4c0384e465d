// A ring of one stage computing in this process: embedding, every layer, and the output head.
#pragma once
#include <deque>
#include <vector>

#include "compute/output_head.h"
#include "compute/transformer_stage.h"
#include "pipeline/ring.h"

namespace glacier::pipeline {

class LocalRing : public Ring {
 public:
  explicit LocalRing(compute::TransformerStage& stage);
  int n_stages() const override { return 1; }
  void submit(const compute::MicroBatch& mb) override;
  bool poll(compute::MicroBatchResult& out, bool wait) override;

 private:
  compute::TransformerStage& stage_;
  compute::OutputHead head_;
  std::vector<float> x_;
  std::deque<compute::MicroBatchResult> done_;
  std::vector<compute::MicroBatchResult> spare_;  // recycled results: no allocation per step
};

}  // namespace glacier::pipeline
