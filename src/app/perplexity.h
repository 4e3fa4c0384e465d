// Perplexity of a text file the way llama-perplexity computes it: the text tokenized with BOS, cut
// into n_ctx-token chunks whose first token is replaced by BOS, each scored on its second half.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/hdf5_perplexity.h"
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

// One chunk's share: the negative log-likelihood summed over its scored tokens, and the perplexity of
// every token scored up to and including this chunk (llama-perplexity's "[k]ppl" figure).
struct PerplexityChunk {
  double nll_sum = 0.0;
  int64_t n_scored = 0;
  double running_ppl = 0.0;
};

// nll_stderr is the standard error of mean_nll over all scored tokens, sqrt((E[nll^2] - E[nll]^2) / (n - 1)),
// and ppl_stderr its first-order propagation to ppl (d exp(x)/dx = exp(x)): llama-perplexity's "+/-" figure.
// NaN when it is undefined (fewer than two tokens, or no spread, where llama-perplexity prints an error).
struct PerplexityResult : io::PerplexityEstimate {
  std::vector<PerplexityChunk> chunks;
};

// Folds chunks in order, as they finish: llama-perplexity sums the tokens' NLL and squared NLL chunk by
// chunk and prints the running perplexity after each.
class PerplexityAccumulator {
 public:
  const PerplexityChunk& add_chunk(const std::vector<float>& target_logprobs);
  PerplexityResult result() const;

 private:
  double nll_ = 0.0;
  double nll2_ = 0.0;
  int64_t count_ = 0;
  std::vector<PerplexityChunk> chunks_;
};

// Combines the chunks' target log-probs (in chunk order, as llama-perplexity sums them).
PerplexityResult combine_perplexity(const std::vector<std::vector<float>>& chunk_logprobs);

// llama-perplexity's stdout: "[1]3.3266,[2]3.5436," (the running values to 4 decimals) and
// "Final estimate: PPL = 4.6481 +/- 0.25469".
std::string format_running_ppl(int32_t chunk_number, double running_ppl);
std::string format_final_estimate(const PerplexityResult& r);
// One line per chunk: its number (from 1), scored tokens, NLL sum and mean (nats) and the running ppl.
std::string format_chunk_table(const PerplexityResult& r);

// The figures as the JSONL line and the `perplexity` root attribute hold them (NaN becomes null).
nlohmann::json perplexity_json(const PerplexityPlan& plan, const PerplexityResult& r);
// The /perplexity group's contents; `chunk_logprobs` are the chunks' target log-probs in order.
io::PerplexityTable perplexity_table(const PerplexityPlan& plan, const PerplexityResult& r,
                                     const std::vector<std::vector<float>>& chunk_logprobs);

}  // namespace glacier::app
