// The /perplexity group of a results file: a perplexity run's per-chunk figures, every scored token's
// NLL and the final estimate with its standard error, so two runs (a quantized model and its parent)
// can be compared from their files alone.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace glacier::io {

// The final estimate over every scored token: what a perplexity run computes and the group stores.
struct PerplexityEstimate {
  int64_t n_scored = 0;
  double ppl = 0.0;
  double ppl_stderr = 0.0;  // NaN when undefined
  double mean_nll = 0.0;    // nats per token
  double nll_stderr = 0.0;  // NaN when undefined
};

struct PerplexityTable : PerplexityEstimate {
  int64_t n_ctx = 0;
  int64_t n_tokens_text = 0;
  // One entry per chunk, in text order.
  std::vector<double> chunk_nll_sum;
  std::vector<int64_t> chunk_n_scored;
  std::vector<double> chunk_running_ppl;
  // Per chunk, each scored token's NLL in text order; every chunk scores the same number of tokens.
  std::vector<std::vector<float>> token_nll;
};

// Opens the closed results file at `path` and replaces its /perplexity group. Throws
// std::runtime_error naming the path; InputError when the chunks' token lists differ in length.
void write_perplexity(const std::string& path, const PerplexityTable& table);

// Reads /perplexity back; throws InputError naming the path when the group or a dataset is missing or
// the datasets disagree in length.
PerplexityTable read_perplexity(const std::string& path);

}  // namespace glacier::io
