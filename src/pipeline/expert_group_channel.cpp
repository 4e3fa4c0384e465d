// Expert group over a channel. The leader waits for its sends before returning so its buffer can be
// reused; a member polls for the next micro-batch with backoff (the leader may idle for long between
// micro-batches, longer than a stall timeout, which a plain wait would report as a stall).
#include "pipeline/expert_group_channel.h"

#include <string>

#include "pipeline/wire.h"
#include "util/backoff.h"
#include "util/error.h"

namespace glacier::pipeline {

ChannelExpertGroup::ChannelExpertGroup(comm::Channel& group, int32_t max_tokens, int32_t n_embd) : group_(group) {
  buf_.resize(max_forward_bytes(max_tokens, n_embd));
  if (group.rank() != 0) x_.resize(static_cast<size_t>(max_tokens) * static_cast<size_t>(n_embd));
  requests_.reserve(static_cast<size_t>(2 * group.size()));
}

void ChannelExpertGroup::share_input(const compute::MicroBatch& mb, const float* x, int32_t n_embd) {
  GLACIER_ASSERT(leader(), "only the expert group's leader shares its input");
  encode_forward(mb, x, n_embd, WireCodec::F32, buf_);
  requests_.clear();
  for (int r = 1; r < group_.size(); ++r)
    requests_.push_back(group_.isend(buf_.data(), buf_.size(), r, comm::tags::kExpertInput));
  for (comm::Request& r : requests_) group_.wait(r);
}

void ChannelExpertGroup::release_members() {
  GLACIER_ASSERT(leader(), "only the expert group's leader releases the members");
  buf_ = encode_shutdown();
  requests_.clear();
  for (int r = 1; r < group_.size(); ++r)
    requests_.push_back(group_.isend(buf_.data(), buf_.size(), r, comm::tags::kExpertInput));
  for (comm::Request& r : requests_) group_.wait(r);
}

int64_t ChannelExpertGroup::follow_leader(compute::TransformerStage& stage, TraceLog* trace) {
  GLACIER_ASSERT(!leader(), "the leader runs its own micro-batches");
  const int32_t n_embd = stage.config().n_embd;
  buf_.resize(max_forward_bytes(stage.max_tokens(), n_embd));
  compute::MicroBatch mb;
  int64_t ran = 0;
  for (;;) {
    const double t_wait = trace ? trace->now() : 0.0;
    comm::Request req = group_.irecv(buf_.data(), buf_.size(), 0, comm::tags::kExpertInput);
    size_t bytes = 0;
    Backoff backoff(backoff::kMessage);
    while (!group_.test(req, &bytes)) backoff.pause();
    const MessageCheck check = check_message(buf_.data(), bytes);
    if (check.status != MessageCheck::Status::Sound)
      throw InternalError("expert group: a damaged micro-batch from the group's leader (micro-batch " +
                          std::to_string(check.mb_id) + ")");
    const MessageKind kind = decode_forward(buf_.data(), bytes, n_embd, mb, x_.data());
    if (kind == MessageKind::Shutdown) return ran;
    GLACIER_ASSERT(kind == MessageKind::MicroBatch, "the leader shares micro-batches only");
    const double t_compute = trace ? trace->now() : 0.0;
    stage.run_layers(mb, x_.data());
    if (trace) {
      trace->add(mb.id, Phase::Wait, t_wait, t_compute);
      trace->add(mb.id, compute_phase(mb), t_compute, trace->now(), mb.n_tokens());
    }
    ++ran;
  }
}

template <class SendPart>
void ChannelExpertGroup::exchange(int tag, SendPart send_part, const std::vector<size_t>& counts_to, float* recv,
                                  const std::vector<size_t>& counts_from) {
  const int G = group_.size(), me = group_.rank();
  GLACIER_ASSERT(static_cast<int>(counts_to.size()) == G && static_cast<int>(counts_from.size()) == G,
                 "one count a member");
  requests_.clear();
  expected_.clear();
  // Receives first, then sends, all nonblocking: no member waits for another to post.
  size_t start = 0;
  for (int j = 0; j < G; ++j) {
    const size_t count = counts_from[static_cast<size_t>(j)];
    if (j != me && count > 0) {
      requests_.push_back(group_.irecv(recv + start, count * sizeof(float), j, tag));
      expected_.push_back(count * sizeof(float));
    }
    start += count;
  }
  for (int j = 0; j < G; ++j) {
    const size_t count = counts_to[static_cast<size_t>(j)];
    if (j != me && count > 0) requests_.push_back(group_.isend(send_part(j), count * sizeof(float), j, tag));
  }
  for (size_t i = 0; i < requests_.size(); ++i) {
    size_t got = 0;
    group_.wait(requests_[i], &got);
    // Every member routes the same tokens alike, so the sizes agree unless the members diverged (a bug).
    GLACIER_ASSERT(i >= expected_.size() || got == expected_[i], "parts of the size the routing implies");
  }
}

void ChannelExpertGroup::all_to_all(const float* send, const std::vector<size_t>& counts_to, float* recv,
                                    const std::vector<size_t>& counts_from) {
  GLACIER_ASSERT(counts_to.size() == static_cast<size_t>(group_.size()) && counts_to[static_cast<size_t>(index())] == 0,
                 "an all-to-all sends nothing to its own member");
  std::vector<size_t>& offset = send_offsets_;
  offset.assign(counts_to.size(), 0);
  for (size_t j = 1; j < counts_to.size(); ++j) offset[j] = offset[j - 1] + counts_to[j - 1];
  exchange(comm::tags::kExpertOutputs, [&](int j) { return send + offset[static_cast<size_t>(j)]; }, counts_to, recv,
           counts_from);
}

void ChannelExpertGroup::all_gather(const float* mine, const std::vector<size_t>& counts, float* all) {
  // This member's own span of `all` is left alone: the caller has its values in place already.
  counts_to_.assign(counts.size(), counts[static_cast<size_t>(index())]);  // its own values to every member
  exchange(comm::tags::kExpertRows, [&](int) { return mine; }, counts_to_, all, counts);
}

}  // namespace glacier::pipeline
