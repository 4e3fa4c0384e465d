// LocalRing: computes a micro-batch as soon as it is submitted and queues its result.
#include "pipeline/local_ring.h"

#include "util/error.h"

namespace glacier::pipeline {

LocalRing::LocalRing(compute::TransformerStage& stage)
    : stage_(stage), head_(stage),
      x_(static_cast<size_t>(stage.max_tokens()) * stage.config().n_embd) {}

void LocalRing::submit(const compute::MicroBatch& mb) {
  stage_.embed(mb, x_.data());
  stage_.run_layers(mb, x_.data());
  compute::MicroBatchResult r;
  if (!spare_.empty()) {
    r = std::move(spare_.back());
    spare_.pop_back();
  }
  head_.evaluate(mb, x_.data(), r);
  done_.push_back(std::move(r));
}

bool LocalRing::poll(compute::MicroBatchResult& out, bool wait) {
  if (done_.empty()) {
    GLACIER_ASSERT(!wait, "waiting on a local ring with nothing submitted");
    return false;
  }
  spare_.push_back(std::move(out));
  out = std::move(done_.front());
  done_.pop_front();
  return true;
}

}  // namespace glacier::pipeline
