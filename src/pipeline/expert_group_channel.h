// An expert group (compute/expert_group.h) over a comm channel holding just its members, the leader at
// rank 0: the leader hands each micro-batch to the others as a forward message (f32, so bit for bit),
// and the members exchange expert outputs and finished rows point to point.
#pragma once
#include <cstdint>
#include <vector>

#include "comm/channel.h"
#include "compute/expert_group.h"
#include "compute/transformer_stage.h"
#include "pipeline/trace.h"

namespace glacier::pipeline {

class ChannelExpertGroup : public compute::ExpertGroup {
 public:
  // `group`: the members' channel (member index = its rank there); micro-batches of up to max_tokens.
  ChannelExpertGroup(comm::Channel& group, int32_t max_tokens, int32_t n_embd);

  int32_t size() const override { return group_.size(); }
  int32_t index() const override { return group_.rank(); }
  void share_input(const compute::MicroBatch& mb, const float* x, int32_t n_embd) override;
  void all_to_all(const float* send, const std::vector<size_t>& counts_to, float* recv,
                  const std::vector<size_t>& counts_from) override;
  void all_gather(const float* mine, const std::vector<size_t>& counts, float* all) override;

  // Leader: ends the other members' follow_leader(). Called at the end of each phase in which the leader
  // runs layers (the start-up timing of decode steps, then the ring), while the members follow.
  void release_members();
  // A member other than the leader: runs every micro-batch the leader shares on `stage` (whose expert
  // group this is) until release_members(); returns how many it ran. With a trace, each micro-batch's wait
  // for the leader and its compute interval (the layers, the exchange of expert outputs inside) go to it.
  int64_t follow_leader(compute::TransformerStage& stage, TraceLog* trace = nullptr);

 private:
  // Posts a receive of counts_from[j] floats from each other member j (at recv's member-order offsets),
  // then sends part j (counts_to[j] floats at `send_part(j)`) to each, all nonblocking, and waits for them.
  template <class SendPart>
  void exchange(int tag, SendPart send_part, const std::vector<size_t>& counts_to, float* recv,
                const std::vector<size_t>& counts_from);

  comm::Channel& group_;
  std::vector<uint8_t> buf_;  // the leader's message out, or a member's message in
  std::vector<float> x_;      // a member's layer input
  std::vector<comm::Request> requests_;
  std::vector<size_t> expected_;  // bytes of each posted receive, in requests_' order
  std::vector<size_t> send_offsets_;  // all_to_all: where each member's part starts in `send`
  std::vector<size_t> counts_to_;     // all_gather: what this member sends each other member
};

}  // namespace glacier::pipeline
