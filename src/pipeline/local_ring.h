// A ring of one stage computing in this process: embedding, every layer, and the output head.
#pragma once
#include <vector>

#include "compute/compute_throttle.h"
#include "compute/output_head.h"
#include "compute/transformer_stage.h"
#include "pipeline/ring.h"
#include "pipeline/trace.h"

namespace glacier::pipeline {

class LocalRing : public Ring {
 public:
  // max_in_flight: how many results may wait at once (the scheduler's bound).
  explicit LocalRing(compute::TransformerStage& stage, int max_in_flight = 8);
  // Records each micro-batch's compute interval there (a job's trace; off by default).
  void set_trace(TraceLog* trace) { trace_ = trace; }
  // Slows each micro-batch's compute (--slow-rank).
  void set_throttle(compute::ComputeThrottle throttle) { throttle_ = throttle; }
  int n_stages() const override { return 1; }
  TraceLog* trace() override { return trace_; }
  void submit(const compute::MicroBatch& mb) override;
  bool poll(compute::MicroBatchResult& out, bool wait) override;

 private:
  compute::TransformerStage& stage_;
  compute::OutputHead head_;
  std::vector<float> x_;
  // Results waiting to be polled, in a fixed ring whose entries keep their capacity: no allocation
  // per step once warm.
  std::vector<compute::MicroBatchResult> done_;
  size_t head_index_ = 0, count_ = 0;
  TraceLog* trace_ = nullptr;
  compute::ComputeThrottle throttle_;
};

}  // namespace glacier::pipeline
