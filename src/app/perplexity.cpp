// Perplexity planning and the sums. Scored positions per chunk: j in [n_ctx/2, n_ctx-2], each
// predicting token j+1 (the first half only gives the later tokens context).
#include "app/perplexity.h"

#include <cmath>
#include <cstdio>
#include <limits>

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

const PerplexityChunk& PerplexityAccumulator::add_chunk(const std::vector<float>& target_logprobs) {
  PerplexityChunk c;
  for (float lp : target_logprobs) {
    const double v = -static_cast<double>(lp);
    c.nll_sum += v;
    nll2_ += v * v;
  }
  c.n_scored = static_cast<int64_t>(target_logprobs.size());
  nll_ += c.nll_sum;
  count_ += c.n_scored;
  c.running_ppl = count_ ? std::exp(nll_ / static_cast<double>(count_)) : std::numeric_limits<double>::quiet_NaN();
  chunks_.push_back(c);
  return chunks_.back();
}

PerplexityResult PerplexityAccumulator::result() const {
  constexpr double kUndefined = std::numeric_limits<double>::quiet_NaN();
  PerplexityResult r;
  r.n_scored = count_;
  r.chunks = chunks_;
  r.mean_nll = count_ ? nll_ / static_cast<double>(count_) : 0.0;
  r.ppl = std::exp(r.mean_nll);
  r.nll_stderr = kUndefined;
  r.ppl_stderr = kUndefined;
  if (count_ >= 2) {
    // The population variance over n - 1: the sample variance over n, i.e. the squared standard error.
    const double spread = nll2_ / static_cast<double>(count_) - r.mean_nll * r.mean_nll;
    if (spread > 0) {
      r.nll_stderr = std::sqrt(spread / static_cast<double>(count_ - 1));
      r.ppl_stderr = r.ppl * r.nll_stderr;
    }
  }
  return r;
}

PerplexityResult combine_perplexity(const std::vector<std::vector<float>>& chunk_logprobs) {
  PerplexityAccumulator acc;
  for (const auto& chunk : chunk_logprobs) acc.add_chunk(chunk);
  return acc.result();
}

std::string format_running_ppl(int32_t chunk_number, double running_ppl) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%d]%.4f,", chunk_number, running_ppl);
  return buf;
}

std::string format_final_estimate(const PerplexityResult& r) {
  char buf[128];
  if (std::isnan(r.ppl_stderr))
    std::snprintf(buf, sizeof buf, "Final estimate: PPL = %.4f (no standard error: %lld scored tokens without spread)",
                  r.ppl, static_cast<long long>(r.n_scored));
  else
    std::snprintf(buf, sizeof buf, "Final estimate: PPL = %.4f +/- %.5f", r.ppl, r.ppl_stderr);
  return buf;
}

std::string format_chunk_table(const PerplexityResult& r) {
  std::string out = "chunk  n_scored       nll_sum  mean_nll  running_ppl\n";
  char buf[128];
  for (size_t c = 0; c < r.chunks.size(); ++c) {
    const PerplexityChunk& k = r.chunks[c];
    const double mean = k.n_scored ? k.nll_sum / static_cast<double>(k.n_scored) : 0.0;
    std::snprintf(buf, sizeof buf, "%5zu  %8lld  %12.6f  %8.6f  %11.4f\n", c + 1, static_cast<long long>(k.n_scored),
                  k.nll_sum, mean, k.running_ppl);
    out += buf;
  }
  return out;
}

nlohmann::json perplexity_json(const PerplexityPlan& plan, const PerplexityResult& r) {
  auto number = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
  nlohmann::json chunks = nlohmann::json::array();
  for (size_t c = 0; c < r.chunks.size(); ++c) {
    const PerplexityChunk& k = r.chunks[c];
    chunks.push_back({{"chunk", c},
                      {"n_scored", k.n_scored},
                      {"nll_sum", k.nll_sum},
                      {"mean_nll", k.n_scored ? k.nll_sum / static_cast<double>(k.n_scored) : 0.0},
                      {"running_ppl", k.running_ppl}});
  }
  return {{"ppl", r.ppl},
          {"ppl_stderr", number(r.ppl_stderr)},
          {"mean_nll", r.mean_nll},
          {"nll_stderr", number(r.nll_stderr)},
          {"n_chunk", plan.n_chunk},
          {"n_ctx", plan.n_ctx},
          {"n_tokens_text", plan.n_tokens_text},
          {"n_scored", r.n_scored},
          {"chunks", std::move(chunks)}};
}

io::PerplexityTable perplexity_table(const PerplexityPlan& plan, const PerplexityResult& r,
                                     const std::vector<std::vector<float>>& chunk_logprobs) {
  io::PerplexityTable t;
  static_cast<io::PerplexityEstimate&>(t) = r;
  t.n_ctx = plan.n_ctx;
  t.n_tokens_text = plan.n_tokens_text;
  for (const PerplexityChunk& k : r.chunks) {
    t.chunk_nll_sum.push_back(k.nll_sum);
    t.chunk_n_scored.push_back(k.n_scored);
    t.chunk_running_ppl.push_back(k.running_ppl);
  }
  for (const auto& lps : chunk_logprobs) {
    std::vector<float> nll;
    nll.reserve(lps.size());
    for (float lp : lps) nll.push_back(-lp);
    t.token_nll.push_back(std::move(nll));
  }
  return t;
}

}  // namespace glacier::app
