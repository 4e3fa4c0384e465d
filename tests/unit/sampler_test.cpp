// The sampler's properties: greedy picks the largest logit (lowest id on ties), the filters keep
// exactly what their definitions say, draws repeat for the same (seed, prompt, step) and follow the
// filtered distribution, and the reported log-probability is the model's own.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>

#include "compute/sampler.h"

using namespace glacier::compute;

namespace {

// Logits whose probabilities are easy to reason about: p_i proportional to weights[i].
std::vector<float> logits_from_weights(const std::vector<double>& w) {
  std::vector<float> l;
  for (double x : w) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

TEST(Sampler, GreedyTakesLargestLogitAndLowestIdOnTies) {
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  EXPECT_EQ(argmax(l.data(), 5), 1);
  Sampler s(5);
  SamplingParams p;  // temperature 0
  EXPECT_EQ(s.choose(l.data(), p, 7, 0).token, 1);
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  const auto l = logits_from_weights({0.05, 0.30, 0.10, 0.40, 0.15});
  Sampler s(5);
  SamplingParams p;
  p.top_k = 3;
  EXPECT_EQ(s.candidates(l.data(), p), (std::vector<int32_t>{3, 1, 4}));
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  const auto l = logits_from_weights({0.05, 0.30, 0.10, 0.40, 0.15});
  Sampler s(5);
  SamplingParams p;
  p.top_p = 0.70f;  // 0.40 + 0.30 = 0.70 reaches it
  EXPECT_EQ(s.candidates(l.data(), p), (std::vector<int32_t>{3, 1}));
  p.top_p = 0.71f;  // needs the 0.15 too
  EXPECT_EQ(s.candidates(l.data(), p), (std::vector<int32_t>{3, 1, 4}));
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  const auto l = logits_from_weights({0.05, 0.30, 0.10, 0.40, 0.15});
  Sampler s(5);
  SamplingParams p;
  p.min_p = 0.3f;  // keep p >= 0.12: 0.40, 0.30, 0.15
  EXPECT_EQ(s.candidates(l.data(), p), (std::vector<int32_t>{3, 1, 4}));
}

TEST(Sampler, DrawsRepeatForTheSameKeysAndFollowTheDistribution) {
  const std::vector<double> w = {0.05, 0.30, 0.10, 0.40, 0.15};
  const auto l = logits_from_weights(w);
  Sampler s(5);
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  EXPECT_EQ(s.choose(l.data(), p, 3, 17).token, s.choose(l.data(), p, 3, 17).token);
  // Many steps: frequencies within 4 standard deviations of the probabilities.
  constexpr int kDraws = 20000;
  std::map<int32_t, int> counts;
  for (int step = 0; step < kDraws; ++step) counts[s.choose(l.data(), p, 3, step).token]++;
  for (int i = 0; i < 5; ++i) {
    const double expected = w[i] * kDraws, sd = std::sqrt(kDraws * w[i] * (1 - w[i]));
    EXPECT_NEAR(counts[i], expected, 4 * sd) << "token " << i;
  }
  // With top-k 2 only the two best ever come out, in proportion 0.40 : 0.30.
  p.top_k = 2;
  counts.clear();
  for (int step = 0; step < kDraws; ++step) counts[s.choose(l.data(), p, 9, step).token]++;
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
  EXPECT_NEAR(static_cast<double>(counts[3]) / kDraws, 0.40 / 0.70, 0.02);
}

TEST(Sampler, LogprobIsTheModelsWhateverTheSettings) {
  const auto l = logits_from_weights({0.05, 0.30, 0.10, 0.40, 0.15});
  Sampler s(5);
  SamplingParams p;
  p.temperature = 0.5f;
  p.top_k = 2;
  const TokenChoice c = s.choose(l.data(), p, 1, 1);
  const double w[] = {0.05, 0.30, 0.10, 0.40, 0.15};
  EXPECT_NEAR(c.logprob, std::log(w[c.token]), 1e-6);
}

TEST(Sampler, CounterUniformIsInRangeAndKeyed) {
  double lo = 1, hi = 0;
  for (uint64_t step = 0; step < 1000; ++step) {
    const double u = counter_uniform(1, 2, step);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  EXPECT_LT(lo, 0.01);
  EXPECT_GT(hi, 0.99);
  EXPECT_NE(counter_uniform(1, 2, 3), counter_uniform(1, 3, 3));
  EXPECT_NE(counter_uniform(1, 2, 3), counter_uniform(2, 2, 3));
}

}  // namespace
