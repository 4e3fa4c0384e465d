// The k most likely tokens of a logits row with their log-probabilities, as evaluation tools ask for
// them (OpenAI's and vLLM's top_logprobs): computed on the last stage where the logits are.
#pragma once
#include <cstdint>

namespace glacier::compute {

// Largest k a request may ask for (OpenAI's and vLLM's default bound).
constexpr int32_t kMaxTopLogprobs = 20;

// Writes the min(k, n_vocab) largest logits' ids to ids[] in descending logit order, ties broken by the
// lower id first (so results do not depend on how a row was computed or split), and their log-probs
// logits[id] - lse to logprobs[], rounded to float the way Sampler::choose rounds the chosen token's
// (`lse` is log_sum_exp of the same row). Returns how many were written. A -inf logit (masked) is a
// candidate like any other: its log-prob is -inf.
int32_t top_logprobs(const float* logits, int32_t n_vocab, int32_t k, double lse, int32_t* ids, float* logprobs);

}  // namespace glacier::compute
