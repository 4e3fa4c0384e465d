// Weight x activation-batch products for a stage: converts the activations once into the weight
// type's form (in storage sized at start-up, so a step allocates nothing) and splits the weight
// rows over the thread pool. Products that share an input (q, k, v; gate, up) run as one split, so
// they share one conversion and one wait for the threads. Used by the attention, dense FFN and MoE code.
#pragma once
#include <cstdint>
#include <initializer_list>
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
  // The same for several matrices of one input width at once: outputs[i].y gets outputs[i].w's product.
  struct Output {
    const kernels::Matrix* w;
    float* y;
  };
  void several(std::initializer_list<Output> outputs, const float* x, int64_t n_rows, int64_t ldx);
  ThreadPool& pool() { return pool_; }

 private:
  kernels::PreparedActivations prepare(const kernels::Matrix& w, const float* x, int64_t n_rows, int64_t ldx,
                                       uint8_t* storage);
  static constexpr int kMaxOutputs = 4;
  // Batches from this many rows convert their activations on every thread (decode rows stay on one:
  // a wait for the threads would cost more than the conversion).
  static constexpr int64_t kParallelPrepareRows = 16;
  static constexpr int kMaxForms = 2;  // distinct activation forms in one call (e.g. Q4_K and Q6_K)
  // Batches below this many rows (decode) share their products out in chunks the threads take as they
  // finish; larger ones, whose products are long and even, keep the static split (F16 prefill measured
  // slower in chunks).
  static constexpr int64_t kClaimedChunksBelowRows = 16;
  // Chunks of output granules each thread takes, on average, of one call's products: enough that a thread
  // the machine slows down takes fewer, few enough that a chunk still holds whole register tiles.
  static constexpr int64_t kChunksPerThread = 4;
  ThreadPool& pool_;
  std::vector<uint8_t> act_storage_[kMaxForms];  // prepared (quantized) activations
};

}  // namespace glacier::compute
