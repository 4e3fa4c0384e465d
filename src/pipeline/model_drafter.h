// --speculate draft:PATH: a small model with the target's vocabulary, run in this process on its own
// ring, proposes each sequence's next tokens by greedy decoding. A greedy draft is a function of the
// history alone, so the verification rules of a deterministic draft apply to it unchanged.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "pipeline/draft_source.h"
#include "pipeline/ring.h"

namespace glacier::pipeline {

class ModelDrafter final : public DraftSource {
 public:
  // `ring` computes the draft model (every layer and its head) with n_slots KV slots of n_ctx positions,
  // micro-batches of at most max_tokens tokens; slot s serves the target's slot s.
  ModelDrafter(Ring& ring, int32_t n_slots, int32_t n_ctx, int32_t max_tokens);

  // The draft model's KV rows of a slot are kept between calls: what they hold in common with the new
  // history (the accepted tokens) is reused, the rest (rejected drafts, another sequence's tail) is
  // written over, so a step computes only the tokens the draft model has not seen plus one per draft.
  int32_t propose(int32_t slot, std::span<const int32_t> history, int32_t max_draft,
                  std::vector<int32_t>& draft) override;

  // Tokens the draft model computed over the run (history it had not seen, and drafts fed back).
  int64_t tokens_computed() const { return tokens_computed_; }

 private:
  // Feeds tokens [from, to) of `fed` into `slot` at their positions; returns the greedy next token.
  int32_t feed(int32_t slot, std::span<const int32_t> fed, int32_t from, int32_t to);

  Ring& ring_;
  int32_t n_ctx_, max_tokens_;
  std::vector<std::vector<int32_t>> cached_;  // per slot: the tokens whose KV rows the draft model holds
  compute::MicroBatch mb_;
  compute::MicroBatchResult result_;
  int64_t next_id_ = 0;
  int64_t tokens_computed_ = 0;
};

}  // namespace glacier::pipeline
