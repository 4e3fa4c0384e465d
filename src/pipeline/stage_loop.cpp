// Stage loop with two posted receives (one being computed on while the next arrives) and two send
// buffers (one in flight while the next is filled). Receives are re-posted as soon as a message is
// decoded, before computing, so the previous stage can always send.
#include "pipeline/stage_loop.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "compute/output_head.h"
#include "util/log.h"

namespace glacier::pipeline {

int64_t run_stage_loop(comm::Channel& ch, compute::TransformerStage& stage, int stage_index, int n_stages,
                       WireCodec codec, TraceLog& trace, const compute::ComputeThrottle& throttle,
                       const WireIntegrity& integrity) {
  const bool last = stage_index == n_stages - 1;
  // World ranks, for reports: the previous stage, this one, and where this stage sends.
  const int me = integrity.world_rank_base + stage_index;
  const int to = last ? integrity.world_rank_base : me + 1;
  SendDamager damager(integrity.corrupt_send);
  int64_t last_sound = -1;  // the last micro-batch that arrived sound
  const int32_t n_embd = stage.config().n_embd;
  const size_t in_capacity = max_forward_bytes(stage.max_tokens(), n_embd);
  std::array<std::vector<uint8_t>, 2> in_buf, out_buf;
  std::array<comm::Request, 2> in_req, out_req;
  for (int i = 0; i < 2; ++i) {
    in_buf[i].resize(in_capacity);
    out_buf[i].reserve(last ? max_back_bytes(stage.max_tokens()) : in_capacity);
    in_req[i] = ch.irecv(in_buf[i].data(), in_buf[i].size(), stage_index - 1, kTagForward);
  }
  std::vector<float> x(static_cast<size_t>(stage.max_tokens()) * n_embd);
  compute::MicroBatch mb;
  compute::MicroBatchResult result;
  std::unique_ptr<compute::OutputHead> head;
  if (last) head = std::make_unique<compute::OutputHead>(stage);
  stage.set_layer_hook([&ch] { ch.progress(); });
  int64_t processed = 0;
  for (int next = 0;; next ^= 1) {
    size_t bytes = 0;
    const double t_wait = trace.now();
    ch.wait(in_req[next], &bytes);
    const double t_recv = trace.now();
    std::optional<std::string> fault;
    int64_t fault_mb = -1;
    MessageKind kind = MessageKind::Fault;
    try {
      verify_received(in_buf[next].data(), bytes, me - 1, me, "activations", last_sound);
      kind = decode_forward(in_buf[next].data(), bytes, n_embd, mb, x.data());
    } catch (const WireIntegrityError& e) {
      fault = e.what();
      GLACIER_LOG_ERROR("%s", e.what());
    }
    if (kind == MessageKind::Fault) {
      if (!fault) fault = fault_report(in_buf[next].data(), bytes);  // found upstream
      fault_mb = check_message(in_buf[next].data(), bytes).mb_id;    // -1 when the header is damaged
    }
    if (kind == MessageKind::Shutdown) {
      ch.cancel(in_req[next ^ 1]);
      for (auto& r : out_req)
        if (r.active()) ch.wait(r);
      if (!last) {
        std::vector<uint8_t> msg = encode_shutdown();
        comm::Request r = ch.isend(msg.data(), msg.size(), stage_index + 1, kTagForward);
        ch.wait(r);
      }
      return processed;
    }
    in_req[next] = ch.irecv(in_buf[next].data(), in_buf[next].size(), stage_index - 1, kTagForward);
    if (fault) {
      // Passed on in the micro-batch's place, so the driver gets one answer per micro-batch it sent.
      if (out_req[next].active()) ch.wait(out_req[next]);
      encode_fault(fault_mb, *fault, out_buf[next]);
      out_req[next] = ch.isend(out_buf[next].data(), out_buf[next].size(), last ? 0 : stage_index + 1,
                               last ? kTagBack : kTagForward);
      continue;
    }
    last_sound = mb.id;
    const double t_compute = trace.now();
    trace.add(mb.id, Phase::Wait, t_wait, t_recv);
    trace.add(mb.id, Phase::Recv, t_recv, t_compute, mb.n_tokens(), static_cast<int64_t>(bytes));
    stage.run_layers(mb, x.data());
    if (last) head->evaluate(mb, x.data(), result);
    throttle.after_compute(trace.now() - t_compute, [&ch] { ch.progress(); });
    const double t_send = trace.now();
    trace.add(mb.id, compute_phase(mb), t_compute, t_send, mb.n_tokens());
    if (out_req[next].active()) ch.wait(out_req[next]);
    size_t payload = 0;
    if (last) {
      encode_back(result, out_buf[next]);
      payload = out_buf[next].size();
    } else {
      payload = encode_forward(mb, x.data(), n_embd, codec, out_buf[next]);
    }
    damager.before_send(out_buf[next], me, to, mb.id);
    out_req[next] = ch.isend(out_buf[next].data(), out_buf[next].size(), last ? 0 : stage_index + 1,
                             last ? kTagBack : kTagForward);
    trace.add(mb.id, Phase::Send, t_send, trace.now(), mb.n_tokens(), static_cast<int64_t>(payload));
    ++processed;
  }
}

}  // namespace glacier::pipeline
