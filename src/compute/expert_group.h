// The ranks of one stage that share its MoE layers' experts (--expert-parallel): each computes only the
// experts it holds; an all-to-all brings each token's expert outputs to the member that finishes the token,
// and an all-gather of the finished rows gives every member the whole MoE block (or, when the stage splits
// a micro-batch's sequences over the members, an all-gather of each member's keys, values and MoE inputs).
// Compute sees only this interface; pipeline/expert_group_channel.h implements it over a comm channel.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "compute/microbatch.h"

namespace glacier::compute {

class ExpertGroup {
 public:
  virtual ~ExpertGroup() = default;
  virtual int32_t size() const = 0;
  virtual int32_t index() const = 0;  // 0: the leader, the member on the ring
  bool leader() const { return index() == 0; }
  bool owns(int32_t expert) const { return expert % size() == index(); }

  // Leader, before its stage runs a micro-batch's layers: hands the micro-batch and its layer input
  // x[n_tokens x n_embd] to every other member, which runs the same layers on them (the members then
  // meet in all_to_all and all_gather in the same order).
  virtual void share_input(const MicroBatch& mb, const float* x, int32_t n_embd) = 0;

  // Collective over the group, an all-to-all: this member sends counts_to[j] floats to each other member j
  // (the parts lie in member order in `send`, counts_to[index()] being 0) and receives counts_from[j]
  // floats from each other member j into `recv`, in member order at the offsets the counts give
  // (counts_from[index()] floats at this member's own place are left alone: a gather keeps its part there).
  virtual void all_to_all(const float* send, const std::vector<size_t>& counts_to, float* recv,
                          const std::vector<size_t>& counts_from) = 0;
  // Collective over the group, an all-gather: member j contributes counts[j] floats (`mine` for this
  // member); `all` receives the other members' in member order, at the offsets the counts give (this
  // member's own span is not written: it has those values already).
  virtual void all_gather(const float* mine, const std::vector<size_t>& counts, float* all) = 0;
};

}  // namespace glacier::compute
