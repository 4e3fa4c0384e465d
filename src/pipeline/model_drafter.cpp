// The draft model's greedy proposals: reuse the KV rows that match the history, feed the rest in
// chunks the draft ring takes, then one token a step for each draft.
#include "pipeline/model_drafter.h"

#include <algorithm>

#include "util/error.h"

namespace glacier::pipeline {

ModelDrafter::ModelDrafter(Ring& ring, int32_t n_slots, int32_t n_ctx, int32_t max_tokens)
    : ring_(ring), n_ctx_(n_ctx), max_tokens_(max_tokens), cached_(static_cast<size_t>(n_slots)) {
  GLACIER_ASSERT(n_slots > 0 && n_ctx > 0 && max_tokens > 0, "a draft ring with slots, context and micro-batches");
}

int32_t ModelDrafter::propose(int32_t slot, std::span<const int32_t> history, int32_t max_draft,
                              std::vector<int32_t>& draft) {
  draft.clear();
  GLACIER_ASSERT(slot >= 0 && static_cast<size_t>(slot) < cached_.size(), "a draft for one of the target's slots");
  const auto size = static_cast<int32_t>(history.size());
  // Drafts 1 .. k-1 are fed back at positions size .. size + k - 2: all inside the context.
  max_draft = std::min(max_draft, n_ctx_ - size + 1);
  if (size == 0 || max_draft <= 0) return 0;
  std::vector<int32_t>& cached = cached_[static_cast<size_t>(slot)];
  // KV rows at a position depend only on the tokens up to it, so the common prefix stays valid whatever
  // sequence wrote it; the history's last token is fed again in any case (its logits give the first draft).
  const int32_t common_limit = std::min(static_cast<int32_t>(cached.size()), size - 1);
  int32_t keep = 0;
  while (keep < common_limit && cached[static_cast<size_t>(keep)] == history[static_cast<size_t>(keep)]) ++keep;
  cached.resize(static_cast<size_t>(keep));  // the rows past the common prefix are written over below
  cached.insert(cached.end(), history.begin() + keep, history.end());
  int32_t next = feed(slot, cached, keep, size);
  while (next >= 0) {
    draft.push_back(next);
    if (static_cast<int32_t>(draft.size()) == max_draft) break;
    cached.push_back(next);
    const auto at = static_cast<int32_t>(cached.size()) - 1;
    next = feed(slot, cached, at, at + 1);
  }
  return static_cast<int32_t>(draft.size());
}

int32_t ModelDrafter::feed(int32_t slot, std::span<const int32_t> tokens, int32_t from, int32_t to) {
  int32_t next = -1;
  for (int32_t at = from; at < to;) {
    const int32_t n = std::min(max_tokens_, to - at);
    mb_.clear();
    mb_.id = next_id_++;
    compute::Chunk c;
    c.seq = slot;
    c.slot = slot;
    c.start_pos = at;
    c.n_tokens = n;
    c.output = at + n == to ? compute::OutputKind::Sample : compute::OutputKind::None;
    c.starts_sequence = at == from;  // greedy drafting keeps no biases or penalties: start the state afresh
    mb_.chunks.push_back(c);
    mb_.tokens.assign(tokens.begin() + at, tokens.begin() + at + n);
    mb_.targets.assign(static_cast<size_t>(n), -1);
    ring_.submit(mb_);
    ring_.poll(result_, /*wait=*/true);
    tokens_computed_ += n;
    at += n;
    if (c.output == compute::OutputKind::Sample) {
      GLACIER_ASSERT(result_.chunks.size() == 1, "one result for the draft's one chunk");
      // A draft model that produces NaN or Inf proposes nothing: the target decodes as without it.
      next = result_.chunks[0].non_finite > 0 ? -1 : result_.chunks[0].token;
    }
  }
  return next;
}

}  // namespace glacier::pipeline
