// Perplexity of a text file the way llama-perplexity computes it: the text tokenized with BOS, cut
// into n_ctx-token chunks whose first token is replaced by BOS, each scored on its second half.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/scheduler.h"

namespace glacier::app {

struct PerplexityPlan {
  int32_t n_ctx = 0;
  int32_t n_chunk = 0;
  int64_t n_tokens_text = 0;
  std::vector<pipeline::SequenceRequest> chunks;
};

// Cuts `tokens` (the whole text, BOS first) into chunks; throws InputError naming `path` when the text
// is shorter than two chunks' worth of scored tokens would need (fewer than n_ctx tokens).
PerplexityPlan plan_perplexity(const std::string& path, const std::vector<int32_t>& tokens, int32_t n_ctx, int32_t bos);

struct PerplexityResult {
  double mean_nll = 0.0;
  double ppl = 0.0;
  int64_t n_scored = 0;
};
// Combines the chunks' target log-probs (in chunk order, as llama-perplexity sums them).
PerplexityResult combine_perplexity(const std::vector<std::vector<float>>& chunk_logprobs);

}  // namespace glacier::app
