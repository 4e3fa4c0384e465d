// The driver's view of a pipeline over several ranks (over any Channel: MPI, or threads in tests):
// this rank (stage 0) embeds and runs its own layers, then streams the activations to stage 1;
// results come back from the last stage. Up to
// `max_in_flight` micro-batches travel at once, each with its own send buffer and a receive posted
// for its result, so transfers overlap compute on every stage.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/channel.h"
#include "compute/compute_throttle.h"
#include "compute/transformer_stage.h"
#include "pipeline/ring.h"
#include "pipeline/trace.h"
#include "pipeline/wire.h"
#include "pipeline/wire_integrity.h"

namespace glacier::pipeline {

class PipelineRing : public Ring {
 public:
  // `throttle` slows this rank's compute (--slow-rank); `integrity` names the ranks in reports of
  // damaged messages (and may damage one on purpose).
  PipelineRing(comm::Channel& ch, compute::TransformerStage& stage, int n_stages, int max_in_flight, WireCodec codec,
          TraceLog& trace, compute::ComputeThrottle throttle = compute::ComputeThrottle(), WireIntegrity integrity = WireIntegrity());
  ~PipelineRing() override;
  int n_stages() const override { return n_stages_; }
  TraceLog* trace() override { return &trace_; }
  void submit(const compute::MicroBatch& mb) override;
  // Throws WireIntegrityError when the result failed its checksum here or a stage reported a damaged
  // message in its place; the ring stays usable (for shutdown()).
  bool poll(compute::MicroBatchResult& out, bool wait) override;
  // Takes back every result still in flight (a driver that stopped early discards them, and logs further
  // damaged messages), then sends the shutdown message down the ring and releases buffers.
  void shutdown();

 private:
  // Like poll(), but a damaged message's report goes to `fault` instead of being thrown.
  bool receive(compute::MicroBatchResult& out, bool wait, std::optional<std::string>& fault);

  comm::Channel& ch_;
  compute::TransformerStage& stage_;
  int n_stages_;
  WireCodec codec_;
  TraceLog& trace_;
  compute::ComputeThrottle throttle_;
  WireIntegrity integrity_;
  SendDamager damager_;
  int64_t last_sound_back_ = -1;  // the last micro-batch whose result arrived sound
  std::vector<float> x_;
  std::vector<std::vector<uint8_t>> send_buf_;
  std::vector<comm::Request> send_req_;
  size_t next_send_ = 0;
  std::vector<std::vector<uint8_t>> back_buf_;
  std::vector<comm::Request> back_req_;
  size_t next_back_ = 0;
  bool shut_ = false;
  int64_t in_flight_ = 0;
};

}  // namespace glacier::pipeline
