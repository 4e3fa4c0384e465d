// Per-sequence changes to a logits row before sampling (logit_bias, the min_tokens mask, repetition /
// presence / frequency penalties), and the per-KV-slot state they need, which the last stage keeps.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "compute/microbatch.h"

namespace glacier::compute {

// One sequence's settings and token counts. The counts are kept only while its sampling is penalized.
class SequenceLogitState {
 public:
  void reset();
  void set_biases(const TokenBias* biases, int32_t n) { biases_.assign(biases, biases + n); }
  void set_min_mask(const int32_t* ids, int32_t n) { min_mask_.assign(ids, ids + n); }
  void add_prompt_token(int32_t id) { counts_[id].prompt++; }
  void add_output_token(int32_t id) { counts_[id].output++; }

  // Changes `logits` in place for the sample at output step `step` (the count of output tokens so far),
  // in this order: (1) logit_bias is added; (2) while step < min_tokens, the min-tokens ids are set to
  // -inf; (3) repetition_penalty: a token seen in the prompt or the output has a positive logit divided
  // by it, a negative one multiplied; (4) logit -= presence * [output count > 0] + frequency * output count.
  void apply(float* logits, int32_t n_vocab, const SamplingParams& p, int32_t step) const;

 private:
  struct Counts {
    int32_t prompt = 0;
    int32_t output = 0;
  };
  std::unordered_map<int32_t, Counts> counts_;
  std::vector<TokenBias> biases_;
  std::vector<int32_t> min_mask_;
};

// The last stage's view of every KV slot: fed every micro-batch in order, it keeps each generate
// sequence's settings (from its first chunk) and its prompt and output token counts (from the tokens
// its chunks feed: the prompt, then each output token as the next decode step feeds it). A slot copy
// (MicroBatch::copies) gives the destination the source's state before any chunk is seen.
class SlotLogitStates {
 public:
  void observe(const MicroBatch& mb);
  const SequenceLogitState& slot(int32_t slot) { return slots_[slot]; }

 private:
  std::unordered_map<int32_t, SequenceLogitState> slots_;
};

}  // namespace glacier::compute
