// LocalRing: computes a micro-batch as soon as it is submitted and queues its result.
#include "pipeline/local_ring.h"

#include "util/clock.h"
#include "util/error.h"

namespace glacier::pipeline {

LocalRing::LocalRing(compute::TransformerStage& stage, int max_in_flight)
    : stage_(stage), head_(stage),
      x_(static_cast<size_t>(stage.max_tokens()) * stage.config().n_embd),
      done_(static_cast<size_t>(max_in_flight)) {}

void LocalRing::submit(const compute::MicroBatch& mb) {
  const double t0 = trace_ ? trace_->now() : 0.0;
  const double started = now_seconds();
  stage_.embed(mb, x_.data());
  stage_.run_layers(mb, x_.data());
  GLACIER_ASSERT(count_ < done_.size(), "more micro-batches in flight than the local ring holds");
  head_.evaluate(mb, x_.data(), done_[(head_index_ + count_) % done_.size()]);
  ++count_;
  throttle_.after_compute(now_seconds() - started);
  if (trace_) trace_->add(mb.id, compute_phase(mb), t0, trace_->now(), mb.n_tokens());
}

bool LocalRing::poll(compute::MicroBatchResult& out, bool wait) {
  if (count_ == 0) {
    GLACIER_ASSERT(!wait, "waiting on a local ring with nothing submitted");
    return false;
  }
  std::swap(out, done_[head_index_]);  // hands over the result, takes back a buffer to reuse
  head_index_ = (head_index_ + 1) % done_.size();
  --count_;
  return true;
}

}  // namespace glacier::pipeline
