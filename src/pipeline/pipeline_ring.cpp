// PipelineRing: results return in submission order (every stage handles micro-batches in order and each
// link is FIFO), so back receives are posted in a ring and completed oldest first.
#include "pipeline/pipeline_ring.h"

#include "util/error.h"
#include "util/log.h"

namespace glacier::pipeline {

PipelineRing::PipelineRing(comm::Channel& ch, compute::TransformerStage& stage, int n_stages, int max_in_flight,
                 WireCodec codec, TraceLog& trace, compute::ComputeThrottle throttle, WireIntegrity integrity)
    : ch_(ch), stage_(stage), n_stages_(n_stages), codec_(codec), trace_(trace), throttle_(throttle),
      integrity_(integrity), damager_(integrity.corrupt_send),
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
  trace_.add(mb.id, compute_phase(mb), t, t_compute, mb.n_tokens());
  comm::Request& req = send_req_[next_send_];
  if (req.active()) ch_.wait(req);  // this buffer's previous message must have left
  std::vector<uint8_t>& buf = send_buf_[next_send_];
  const size_t payload = encode_forward(mb, x_.data(), stage_.config().n_embd, codec_, buf);
  damager_.before_send(buf, integrity_.world_rank_base, integrity_.world_rank_base + 1, mb.id);
  req = ch_.isend(buf.data(), buf.size(), 1, kTagForward);
  trace_.add(mb.id, Phase::Send, t_compute, trace_.now(), mb.n_tokens(), static_cast<int64_t>(payload));
  next_send_ = (next_send_ + 1) % send_buf_.size();
  ++in_flight_;
}

bool PipelineRing::poll(compute::MicroBatchResult& out, bool wait) {
  std::optional<std::string> fault;
  if (!receive(out, wait, fault)) return false;
  if (fault) {
    // Rank 0 reports it when the job ends; another replica's driver says it now, with its rank.
    if (integrity_.world_rank_base != 0) GLACIER_LOG_ERROR("%s", fault->c_str());
    throw WireIntegrityError(*fault);
  }
  return true;
}

bool PipelineRing::receive(compute::MicroBatchResult& out, bool wait, std::optional<std::string>& fault) {
  comm::Request& req = back_req_[next_back_];
  size_t bytes = 0;
  const double t = trace_.now();
  if (wait) {
    ch_.wait(req, &bytes);
  } else if (!ch_.test(req, &bytes)) {
    return false;
  }
  const double t_arrived = trace_.now();
  const uint8_t* msg = back_buf_[next_back_].data();
  try {
    verify_received(msg, bytes, integrity_.world_rank_base + n_stages_ - 1, integrity_.world_rank_base, "results",
                    last_sound_back_);
    if (decode_back(msg, bytes, out) == MessageKind::Fault) {
      fault = fault_report(msg, bytes);  // found on an earlier link and passed on in this result's place
    } else {
      last_sound_back_ = out.id;
      trace_.add(out.id, Phase::Wait, t, t_arrived);
      trace_.add(out.id, Phase::Recv, t_arrived, trace_.now(), 0, static_cast<int64_t>(bytes));
    }
  } catch (const WireIntegrityError& e) {
    fault = e.what();
  }
  // Either way this result's place in the ring is used up: the next one can arrive.
  req = ch_.irecv(back_buf_[next_back_].data(), back_buf_[next_back_].size(), n_stages_ - 1, kTagBack);
  next_back_ = (next_back_ + 1) % back_buf_.size();
  --in_flight_;
  return true;
}

void PipelineRing::shutdown() {
  compute::MicroBatchResult discard;
  while (in_flight_ > 0) {
    std::optional<std::string> fault;
    receive(discard, /*wait=*/true, fault);
    if (fault) GLACIER_LOG_ERROR("while ending the ring: %s", fault->c_str());
  }
  for (auto& r : send_req_)
    if (r.active()) ch_.wait(r);
  std::vector<uint8_t> msg = encode_shutdown();
  comm::Request r = ch_.isend(msg.data(), msg.size(), 1, kTagForward);
  ch_.wait(r);
  for (auto& b : back_req_) ch_.cancel(b);
  shut_ = true;
}

}  // namespace glacier::pipeline
