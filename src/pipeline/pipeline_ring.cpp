// PipelineRing: results return in submission order (every stage handles micro-batches in order and each
// link is FIFO), so back receives are posted in a ring and completed oldest first.
#include "pipeline/pipeline_ring.h"

#include "util/error.h"

namespace glacier::pipeline {

PipelineRing::PipelineRing(comm::Channel& ch, compute::TransformerStage& stage, int n_stages, int max_in_flight,
                 WireCodec codec, TraceLog& trace, ComputeThrottle throttle)
    : ch_(ch), stage_(stage), n_stages_(n_stages), codec_(codec), trace_(trace), throttle_(throttle),
      x_(static_cast<size_t>(stage.max_tokens()) * stage.config().n_embd),
      send_buf_(static_cast<size_t>(max_in_flight)), send_req_(static_cast<size_t>(max_in_flight)),
      back_buf_(static_cast<size_t>(max_in_flight)), back_req_(static_cast<size_t>(max_in_flight)) {
  const size_t fwd = max_forward_bytes(stage.max_tokens(), stage.config().n_embd);
  for (auto& b : send_buf_) b.reserve(fwd);
  for (size_t i = 0; i < back_buf_.size(); ++i) {
    back_buf_[i].resize(max_back_bytes(stage.max_tokens()));
    back_req_[i] = ch_.irecv(back_buf_[i].data(), back_buf_[i].size(), n_stages_ - 1, kTagBack);
  }
  stage_.set_layer_hook([this] { ch_.progress(); });
}

PipelineRing::~PipelineRing() {
  if (!shut_) {
    for (auto& r : back_req_) ch_.cancel(r);
  }
}

void PipelineRing::submit(const compute::MicroBatch& mb) {
  double t = trace_.now();
  stage_.embed(mb, x_.data());
  stage_.run_layers(mb, x_.data());
  throttle_.after_compute(trace_.now() - t, [this] { ch_.progress(); });
  const double t_compute = trace_.now();
  trace_.add(mb.id, Phase::Compute, t, t_compute, mb.n_tokens());
  comm::Request& req = send_req_[next_send_];
  if (req.active()) ch_.wait(req);  // this buffer's previous message must have left
  std::vector<uint8_t>& buf = send_buf_[next_send_];
  const size_t payload = encode_forward(mb, x_.data(), stage_.config().n_embd, codec_, buf);
  req = ch_.isend(buf.data(), buf.size(), 1, kTagForward);
  trace_.add(mb.id, Phase::Send, t_compute, trace_.now(), mb.n_tokens(), static_cast<int64_t>(payload));
  next_send_ = (next_send_ + 1) % send_buf_.size();
  ++in_flight_;
}

bool PipelineRing::poll(compute::MicroBatchResult& out, bool wait) {
  comm::Request& req = back_req_[next_back_];
  size_t bytes = 0;
  const double t = trace_.now();
  if (wait) {
    ch_.wait(req, &bytes);
  } else if (!ch_.test(req, &bytes)) {
    return false;
  }
  const double t_arrived = trace_.now();
  decode_back(back_buf_[next_back_].data(), bytes, out);
  trace_.add(out.id, Phase::Wait, t, t_arrived);
  trace_.add(out.id, Phase::Recv, t_arrived, trace_.now(), 0, static_cast<int64_t>(bytes));
  req = ch_.irecv(back_buf_[next_back_].data(), back_buf_[next_back_].size(), n_stages_ - 1, kTagBack);
  next_back_ = (next_back_ + 1) % back_buf_.size();
  --in_flight_;
  return true;
}

void PipelineRing::shutdown() {
  compute::MicroBatchResult discard;
  while (in_flight_ > 0) poll(discard, /*wait=*/true);
  for (auto& r : send_req_)
    if (r.active()) ch_.wait(r);
  std::vector<uint8_t> msg = encode_shutdown();
  comm::Request r = ch_.isend(msg.data(), msg.size(), 1, kTagForward);
  ch_.wait(r);
  for (auto& b : back_req_) ch_.cancel(b);
  shut_ = true;
}

}  // namespace glacier::pipeline
