// The sampler's properties: greedy picks the largest logit (lowest id on ties), the filters keep
// exactly what their definitions say, draws repeat for the same (seed, prompt, step) and follow the
// filtered distribution, the reported log-probability is the model's own, and the speculative verify rule
// accepts a draft with its probability and otherwise draws from the rest of the distribution.
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

TEST(Sampler, DistributionIsWhatTheFiltersAndTemperatureLeave) {
  const auto l = logits_from_weights({0.05, 0.30, 0.10, 0.40, 0.15});
  Sampler s(5);
  SamplingParams p;
  p.temperature = 0.5f;  // p proportional to w^2
  const std::vector<double> squared = {0.0025, 0.09, 0.01, 0.16, 0.0225};
  std::vector<double> d = s.distribution(l.data(), p);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(d[i], squared[i] / 0.285, 1e-6) << "token " << i;
  p.temperature = 1.0f;
  p.top_k = 3;  // 0.40, 0.30, 0.15 renormalised
  d = s.distribution(l.data(), p);
  const std::vector<double> top3 = {0.0, 0.30 / 0.85, 0.0, 0.40 / 0.85, 0.15 / 0.85};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(d[i], top3[i], 1e-6) << "token " << i;
  p.temperature = 0.0f;
  EXPECT_EQ(s.distribution(l.data(), p), (std::vector<double>{0, 0, 0, 1, 0}));
}

// The rule on hand-made rows: for every draft d, over many steps (the sequence's stream), d is accepted
// with frequency p(d), and the tokens drawn on rejection follow p(y) / (1 - p(d)) over y != d (never d).
// A step's verdict is also the plain draw's: its token is choose()'s at the same step.
TEST(Sampler, VerifyAcceptsWithTheDraftsProbabilityAndDrawsTheRestOtherwise) {
  // Frequencies within this many binomial standard deviations: were the streams random, the 100 checks
  // below at 4.5 sigma would raise a false alarm about once in 1,500 runs (they are fixed, so the outcome
  // is too), while a rule off by a few percent of probability is many sigma out at these counts.
  constexpr double kSigmas = 4.5;
  constexpr int kSteps = 40000;
  const auto l = logits_from_weights({0.05, 0.30, 0.10, 0.40, 0.15});
  Sampler s(5);
  std::vector<SamplingParams> settings(4);
  settings[0].temperature = 1.0f;
  settings[1].temperature = 0.7f;
  settings[1].top_k = 4;
  settings[2].temperature = 1.3f;
  settings[2].top_p = 0.8f;
  settings[3].temperature = 1.0f;
  settings[3].min_p = 0.3f;
  for (size_t k = 0; k < settings.size(); ++k) {
    SamplingParams& p = settings[k];
    p.seed = 77;
    const std::vector<double> dist = s.distribution(l.data(), p);
    for (int32_t draft = 0; draft < 5; ++draft) {
      const std::string where = "setting " + std::to_string(k) + ", draft " + std::to_string(draft);
      int accepted = 0;
      std::vector<int> instead(5, 0);
      for (int step = 0; step < kSteps; ++step) {
        const VerifiedToken v = s.verify(l.data(), p, 5, step, draft);
        ASSERT_EQ(v.choice.token, s.choose(l.data(), p, 5, step).token) << where;
        ASSERT_EQ(v.accepted, v.choice.token == draft) << where;
        if (v.accepted) {
          ++accepted;
        } else {
          instead[static_cast<size_t>(v.choice.token)]++;
        }
      }
      const double pd = dist[static_cast<size_t>(draft)];
      EXPECT_NEAR(accepted, pd * kSteps, kSigmas * std::sqrt(kSteps * pd * (1 - pd)) + 0.5) << where;
      const int rejected = kSteps - accepted;
      EXPECT_EQ(instead[static_cast<size_t>(draft)], 0) << where << ": a rejected draft is never the row's token";
      for (int y = 0; y < 5; ++y) {
        if (y == draft) continue;
        const double q = dist[static_cast<size_t>(y)] / (1 - pd);  // the residual distribution
        EXPECT_NEAR(instead[static_cast<size_t>(y)], q * rejected, kSigmas * std::sqrt(rejected * q * (1 - q)) + 0.5)
            << where << ", token " << y;
      }
    }
  }
}

TEST(Sampler, GreedyVerifyAcceptsExactlyTheArgmax) {
  const auto l = logits_from_weights({0.05, 0.30, 0.10, 0.40, 0.15});
  Sampler s(5);
  SamplingParams p;  // temperature 0
  for (int32_t draft = 0; draft < 5; ++draft)
    for (int step = 0; step < 4; ++step) {
      const VerifiedToken v = s.verify(l.data(), p, 1, step, draft);
      EXPECT_EQ(v.accepted, draft == 3) << "draft " << draft;
      EXPECT_EQ(v.choice.token, 3) << "draft " << draft;
      EXPECT_NEAR(v.choice.logprob, std::log(0.40), 1e-6);
    }
}

}  // namespace
