// Weight x activation-batch products for a stage: converts the activations once into the weight
// type's form (in storage sized at start-up, so a step allocates nothing) and splits the weight
// rows over the thread pool. Shared by the attention, dense FFN and MoE code.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/matmul.h"
#include "util/thread_pool.h"

namespace glacier::compute {

class StageMatmul {
 public:
  explicit StageMatmul(ThreadPool& pool) : pool_(pool) {}
  // Grows the activation storage to fit `max_rows` input rows for `w` (call for every matrix at start-up).
  void reserve(const kernels::Matrix& w, int64_t max_rows);
  // y[r * w.rows + o] = W row o . x row r, for the n_rows rows of x (row stride ldx floats).
  void operator()(const kernels::Matrix& w, const float* x, int64_t n_rows, int64_t ldx, float* y);
  ThreadPool& pool() { return pool_; }

 private:
  ThreadPool& pool_;
  std::vector<uint8_t> act_storage_;  // prepared (quantized) activations
};

}  // namespace glacier::compute
