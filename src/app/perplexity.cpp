// Perplexity planning and the final sum. Scored positions per chunk: j in [n_ctx/2, n_ctx-2], each
// predicting token j+1 (the first half only gives the later tokens context).
#include "app/perplexity.h"

#include <cmath>

#include "util/error.h"

namespace glacier::app {

PerplexityPlan plan_perplexity(const std::string& path, const std::vector<int32_t>& tokens, int32_t n_ctx, int32_t bos) {
  PerplexityPlan p;
  p.n_ctx = n_ctx;
  p.n_tokens_text = static_cast<int64_t>(tokens.size());
  p.n_chunk = static_cast<int32_t>(p.n_tokens_text / n_ctx);
  if (p.n_chunk == 0)
    throw InputError(path + ": perplexity needs at least --ctx (" + std::to_string(n_ctx) +
                     ") tokens of text, found " + std::to_string(tokens.size()));
  if (bos < 0) throw InputError(path + ": perplexity needs a model with a BOS token to start each chunk, found none");
  const int32_t first = n_ctx / 2;
  for (int32_t c = 0; c < p.n_chunk; ++c) {
    pipeline::SequenceRequest r;
    r.seq = c;
    r.mode = pipeline::SeqMode::Score;
    r.tokens.assign(tokens.begin() + static_cast<int64_t>(c) * n_ctx, tokens.begin() + static_cast<int64_t>(c + 1) * n_ctx);
    r.tokens[0] = bos;
    r.targets.assign(static_cast<size_t>(n_ctx), -1);
    for (int32_t j = first; j <= n_ctx - 2; ++j) r.targets[j] = r.tokens[j + 1];
    r.tokens.pop_back();  // the chunk's last token is only predicted
    r.targets.pop_back();
    p.chunks.push_back(std::move(r));
  }
  return p;
}

PerplexityResult combine_perplexity(const std::vector<std::vector<float>>& chunk_logprobs) {
  PerplexityResult r;
  double nll = 0.0;
  for (const auto& chunk : chunk_logprobs)
    for (float lp : chunk) {
      nll -= lp;
      ++r.n_scored;
    }
  r.mean_nll = r.n_scored ? nll / static_cast<double>(r.n_scored) : 0.0;
  r.ppl = std::exp(r.mean_nll);
  return r;
}

}  // namespace glacier::app
