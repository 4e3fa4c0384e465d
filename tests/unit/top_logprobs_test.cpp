// Top-k log-prob selection: a hand-computed row (ties go to the lower id), k beyond the vocabulary,
// masked (-inf) logits, and agreement with the sampler's own log-prob for the greedy token.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "compute/sampler.h"
#include "compute/top_logprobs.h"

using namespace glacier::compute;

namespace {

TEST(TopLogprobs, HandComputedRowWithTiesLowerIdFirst) {
  // Probabilities proportional to 1, 4, 2, 4, 1, 2, 2: the total is 16, so log p = log(w / 16).
  // Sorted by probability, ids 1 and 3 tie at 4/16 and ids 2, 5, 6 tie at 2/16.
  const std::vector<double> weights = {1, 4, 2, 4, 1, 2, 2};
  std::vector<float> logits;
  for (double w : weights) logits.push_back(static_cast<float>(std::log(w)));
  const double lse = log_sum_exp(logits.data(), 7);
  int32_t ids[kMaxTopLogprobs];
  float logprobs[kMaxTopLogprobs];
  ASSERT_EQ(top_logprobs(logits.data(), 7, 4, lse, ids, logprobs), 4);
  const std::vector<int32_t> expected_ids = {1, 3, 2, 5};
  const std::vector<double> expected_p = {4.0 / 16, 4.0 / 16, 2.0 / 16, 2.0 / 16};
  // The vector exp of log_sum_exp is within 2 ulp per term (exp_approx.h); 1e-6 in log space covers it.
  constexpr double kLogTolerance = 1e-6;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ids[i], expected_ids[i]) << "rank " << i;
    EXPECT_NEAR(logprobs[i], std::log(expected_p[i]), kLogTolerance) << "rank " << i;
  }
  // k = 6 takes the third of the tied 2/16 ids (6) before either 1/16 one.
  ASSERT_EQ(top_logprobs(logits.data(), 7, 6, lse, ids, logprobs), 6);
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 6), (std::vector<int32_t>{1, 3, 2, 5, 6, 0}));
  for (int i = 1; i < 6; ++i) EXPECT_LE(logprobs[i], logprobs[i - 1]) << "sorted, rank " << i;
  EXPECT_EQ(top_logprobs(logits.data(), 7, 0, lse, ids, logprobs), 0);
}

TEST(TopLogprobs, AllTiedRowIsInIdOrderAndKIsCappedByTheVocabulary) {
  const std::vector<float> logits(5, 0.25f);
  int32_t ids[kMaxTopLogprobs];
  float logprobs[kMaxTopLogprobs];
  ASSERT_EQ(top_logprobs(logits.data(), 5, kMaxTopLogprobs, log_sum_exp(logits.data(), 5), ids, logprobs), 5);
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 5), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  constexpr double kLogTolerance = 1e-6;
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(logprobs[i], std::log(0.2), kLogTolerance);
}

TEST(TopLogprobs, MaskedLogitsComeLastWithMinusInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {-inf, 1.0f, -inf, 0.0f};
  int32_t ids[4];
  float logprobs[4];
  ASSERT_EQ(top_logprobs(logits.data(), 4, 4, log_sum_exp(logits.data(), 4), ids, logprobs), 4);
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 4), (std::vector<int32_t>{1, 3, 0, 2}));
  EXPECT_EQ(logprobs[2], -inf);
  EXPECT_EQ(logprobs[3], -inf);
}

// The first alternative of a greedy step is the chosen token with bit-for-bit the same log-prob.
TEST(TopLogprobs, FirstAlternativeIsTheGreedyChoiceWithItsLogprob) {
  std::vector<float> logits;
  for (int i = 0; i < 1000; ++i) logits.push_back(std::sin(0.37f * static_cast<float>(i)) * 4.0f);
  Sampler sampler(1000);
  SamplingParams greedy;
  const TokenChoice choice = sampler.choose(logits.data(), greedy, 1, 0);
  int32_t ids[kMaxTopLogprobs];
  float logprobs[kMaxTopLogprobs];
  ASSERT_EQ(top_logprobs(logits.data(), 1000, 5, choice.lse, ids, logprobs), 5);
  EXPECT_EQ(ids[0], choice.token);
  EXPECT_EQ(logprobs[0], choice.logprob);
  for (int i = 0; i < 5; ++i) {
    const auto [lp, is_greedy] = target_logprob(logits.data(), 1000, ids[i]);
    EXPECT_EQ(logprobs[i], static_cast<float>(lp)) << "the scorer's log-prob for the same token, rank " << i;
    EXPECT_EQ(is_greedy, i == 0);
  }
}

}  // namespace
