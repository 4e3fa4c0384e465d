// Sampling and scoring over a logits row. Log-probabilities use a log-sum-exp of the row as given (float
// exponentials summed in double), so the figure written for a token does not depend on temperature or filters.
#include "compute/sampler.h"

#include <algorithm>
#include <cmath>

#include "kernels/dispatch.h"
#include "util/error.h"

namespace glacier::compute {
namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

double counter_uniform(uint64_t seed, uint64_t prompt_key, uint64_t step) {
  uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ prompt_key);
  h = splitmix64(h ^ step);
  return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);  // 53 random bits
}

uint64_t sample_stream_key(uint64_t prompt_key, int32_t sample) {
  if (sample == 0) return prompt_key;
  // A constant apart from the other keys' mixing, so (key, j) cannot collide with a plain prompt key chain.
  constexpr uint64_t kSampleDomain = 0x73616d706c65ULL;  // "sample"
  return splitmix64(splitmix64(prompt_key ^ kSampleDomain) ^ static_cast<uint64_t>(sample));
}

int32_t argmax(const float* logits, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

double log_sum_exp(const float* logits, int32_t n) {
  const float mx = logits[argmax(logits, n)];
  // The vocabulary-wide sum runs every token on every row: the vector exp of the kernels (exp_approx.h,
  // under 2 ulp) in float, chunk sums added in double.
  return mx + std::log(kernels::active_kernels().sum_exp(logits, n, mx));
}

std::pair<double, bool> target_logprob(const float* logits, int32_t n, int32_t target) {
  GLACIER_ASSERT(target >= 0 && target < n, "target token within the vocabulary");
  return {static_cast<double>(logits[target]) - log_sum_exp(logits, n), argmax(logits, n) == target};
}

bool all_finite(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

Sampler::Sampler(int32_t n_vocab) : n_vocab_(n_vocab) {
  cand_.reserve(static_cast<size_t>(n_vocab));
  probs_.reserve(static_cast<size_t>(n_vocab));
}

void Sampler::filter(const float* logits, const SamplingParams& p) {
  cand_.clear();
  for (int32_t i = 0; i < n_vocab_; ++i) cand_.emplace_back(logits[i], i);
  auto by_logit = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (p.top_k > 0 && p.top_k < n_vocab_) {
    std::partial_sort(cand_.begin(), cand_.begin() + p.top_k, cand_.end(), by_logit);
    cand_.resize(static_cast<size_t>(p.top_k));
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  // Probabilities of the survivors at temperature 1 (relative to the best one; normalized below).
  probs_.assign(cand_.size(), 0.0);
  double sum = 0.0;
  for (size_t i = 0; i < cand_.size(); ++i) sum += probs_[i] = std::exp(static_cast<double>(cand_[i].first) - cand_[0].first);
  size_t keep = cand_.size();
  if (p.top_p < 1.0f) {
    double cum = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      cum += probs_[i] / sum;
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p.min_p > 0.0f) {
    size_t i = 1;  // the best candidate always stays
    while (i < keep && probs_[i] >= p.min_p * probs_[0]) ++i;
    keep = i;
  }
  cand_.resize(keep);
}

std::vector<int32_t> Sampler::candidates(const float* logits, const SamplingParams& p) {
  filter(logits, p);
  std::vector<int32_t> ids;
  for (auto& c : cand_) ids.push_back(c.second);
  return ids;
}

double Sampler::weigh(const float* logits, const SamplingParams& p) {
  filter(logits, p);
  probs_.resize(cand_.size());
  double sum = 0.0;
  for (size_t i = 0; i < cand_.size(); ++i)
    sum += probs_[i] = std::exp((static_cast<double>(cand_[i].first) - cand_[0].first) / p.temperature);
  return sum;
}

TokenChoice Sampler::choose(const float* logits, const SamplingParams& p, uint64_t prompt_key, int32_t step) {
  TokenChoice out;
  if (p.temperature <= 0.0f) {
    out.token = argmax(logits, n_vocab_);
  } else {
    const double sum = weigh(logits, p);
    const double u = counter_uniform(p.seed, prompt_key, static_cast<uint64_t>(step)) * sum;
    double cum = 0.0;
    // Should u round up to the sum, the last candidate that can be drawn (never a masked one, p = 0).
    size_t last_drawable = 0;
    for (size_t i = 0; i < cand_.size(); ++i)
      if (probs_[i] > 0.0) last_drawable = i;
    out.token = cand_[last_drawable].second;
    for (size_t i = 0; i < cand_.size(); ++i) {
      cum += probs_[i];
      if (u < cum) {
        out.token = cand_[i].second;
        break;
      }
    }
  }
  out.lse = log_sum_exp(logits, n_vocab_);
  out.logprob = static_cast<float>(static_cast<double>(logits[out.token]) - out.lse);
  return out;
}

// Speculative sampling's rule: a draft d proposed with probability q(d) is accepted with probability
// min(1, p(d) / q(d)), p being the distribution plain decoding draws this row from; on rejection the row's
// token is drawn from max(0, p - q) renormalised, and the verification stops there. Every row's token then
// follows p exactly. Prompt lookup's drafts are deterministic (q is 1 on d), so the rule reads: accept d
// with probability p(d); on rejection draw from p with d removed, renormalised.
//
// It is realised here with the row's one uniform of the sequence's stream, the draw choose() makes at
// this step: x drawn from p, d accepted exactly when x == d, else x is the row's token. P(x == d) = p(d),
// and given x != d, x follows p(y) / (1 - p(d)) over y != d: the rule's acceptance and residual, exactly.
// Coupling the rule to the plain draw also makes a row's token a function of its distribution and its
// (seed, prompt key, step) alone, never of whether or what was drafted: the scheduler's drafting choices
// (which vary with ranks, micro-batching, decode groups and other sequences' progress) cannot change a
// sequence's output, and it is the token --speculate off draws at that step (a verify row's logits are the
// plain step's bit for bit, as the greedy speculation tests check).
VerifiedToken Sampler::verify(const float* logits, const SamplingParams& p, uint64_t prompt_key, int32_t step,
                              int32_t draft) {
  VerifiedToken out;
  out.choice = choose(logits, p, prompt_key, step);
  out.accepted = out.choice.token == draft;
  return out;
}

std::vector<double> Sampler::distribution(const float* logits, const SamplingParams& p) {
  std::vector<double> dist(static_cast<size_t>(n_vocab_), 0.0);
  if (p.temperature <= 0.0f) {
    dist[static_cast<size_t>(argmax(logits, n_vocab_))] = 1.0;
    return dist;
  }
  const double sum = weigh(logits, p);
  for (size_t i = 0; i < cand_.size(); ++i) dist[static_cast<size_t>(cand_[i].second)] = probs_[i] / sum;
  return dist;
}

}  // namespace glacier::compute
