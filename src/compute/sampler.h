// Turns a logits row into a chosen token and its log-probability: greedy, or temperature with
// top-k / top-p / min-p filters, and the rule that accepts or replaces a speculative draft. Random draws
// come from a counter-based generator keyed by (seed, prompt key, step), so a prompt's output is
// independent of batching, ranks and finish order.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "compute/microbatch.h"

namespace glacier::compute {

// Uniform double in [0, 1) from a hash of the three keys (SplitMix64 finalizer chain).
double counter_uniform(uint64_t seed, uint64_t prompt_key, uint64_t step);

// The random stream of sample j of a prompt (n samples): sample 0 keeps the prompt's own key, so it
// draws exactly what the prompt draws with n = 1; sample j > 0 gets a key hashed from (prompt key, j).
uint64_t sample_stream_key(uint64_t prompt_key, int32_t sample);

struct TokenChoice {
  int32_t token = -1;
  // log p(token) under softmax of the row given to choose(): the model's logits after the sequence's
  // logit_bias, min_tokens mask and penalties (logits_processing.h), before temperature and filters.
  float logprob = 0.0f;
  double lse = 0.0;  // log_sum_exp of that row (the normaliser of every log-prob it yields)
};

// A speculative verify row's outcome for one drafted token.
struct VerifiedToken {
  TokenChoice choice;     // the row's token: the draft when accepted, else the token drawn in its place
  bool accepted = false;  // whether the draft was kept (then choice.token is the draft)
};

class Sampler {
 public:
  explicit Sampler(int32_t n_vocab);
  // The filters apply in llama.cpp's default order: top-k, top-p, min-p on the model's probabilities,
  // then the temperature on what is left, then one draw.
  TokenChoice choose(const float* logits, const SamplingParams& p, uint64_t prompt_key, int32_t step);
  // Speculative sampling's rejection rule for a drafted token `draft` in the row of decode step `step`
  // (sampler.cpp states the rule and why it is exact). Greedy rows accept exactly when draft is the argmax.
  VerifiedToken verify(const float* logits, const SamplingParams& p, uint64_t prompt_key, int32_t step, int32_t draft);
  // The distribution choose() draws from for this row, over the whole vocabulary (0 outside the
  // filters; greedy: 1 on the argmax). For tests and statistics; choose() does not call it.
  std::vector<double> distribution(const float* logits, const SamplingParams& p);
  // Indices of the candidates that survive the filters (for tests), in descending probability order.
  std::vector<int32_t> candidates(const float* logits, const SamplingParams& p);

 private:
  void filter(const float* logits, const SamplingParams& p);
  // filter(), then the survivors' unnormalised weights at the temperature in probs_; returns their sum.
  double weigh(const float* logits, const SamplingParams& p);
  int32_t n_vocab_;
  std::vector<std::pair<float, int32_t>> cand_;  // (logit, id), reused: no allocation per token
  std::vector<double> probs_;
};

// log p(target) under softmax(logits), and whether target is the greedy choice (ties: lowest id).
std::pair<double, bool> target_logprob(const float* logits, int32_t n_vocab, int32_t target);
// log-sum-exp of a logits row in double precision.
double log_sum_exp(const float* logits, int32_t n_vocab);
// Greedy choice: the largest logit, the lowest id among ties (as llama.cpp's greedy sampler).
int32_t argmax(const float* logits, int32_t n_vocab);
bool all_finite(const float* x, int64_t n);

}  // namespace glacier::compute
