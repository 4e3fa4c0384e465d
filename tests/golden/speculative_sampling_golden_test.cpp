// Sampled speculative decoding follows the model's distribution: on stories260K with a repetitive prompt,
// the tokens after the first, over many seeds with --speculate lookup, against as many other seeds
// without, pass a chi-square test of homogeneity; the same test rejects an "always accept the draft" rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/engine_harness.h"
#include "common/test_env.h"
#include "compute/sampler.h"
#include "pipeline/prompt_lookup.h"

namespace {

using namespace glacier;

// Homogeneity is rejected below this p-value (split evenly over the positions compared, Bonferroni).
// 0.001: the seeds are fixed, so the outcome is too, but a correct rule should pass for almost any choice
// of them (a false rejection once in 1,000 seed sets), while the wrong rule below is rejected at far
// smaller p-values at these sample sizes.
constexpr double kSignificance = 0.001;
// A bin whose pooled count is below this goes into one merged bin: the chi-square approximation needs
// expected counts of about 5 or more in each cell (10 pooled = 5 a sample when the samples are equal).
constexpr int kMinPooledCount = 10;
// Positions compared: the tokens after the first (the first never comes from a verify row), each of which
// a verify row may give.
const std::vector<size_t> kPositions = {1, 2, 3, 4, 5};
constexpr int32_t kNewTokens = 6;
// Sequences a sample: the always-accept rule below is rejected at p-values near 1e-15 with half as many,
// and each sample runs in a few seconds on stories260K.
constexpr int kSeeds = 600;
// Few slots, so the decode groups stay under the policy's kMaxDraftingSequencesPerGroup and steps draft.
constexpr int32_t kSlots = 6;

// A prompt stories260K continues by repeating it often enough (at this temperature) that many steps draft
// and both verdicts come often (about two drafted tokens in five accepted).
const char* const kPrompt =
    "The cat sat on the mat. The cat sat on the mat. The cat sat on the mat. The cat sat on the mat. The cat sat "
    "on the mat. The cat sat on the";

compute::SamplingParams sampling(uint64_t seed) {
  compute::SamplingParams p;
  p.temperature = 0.5f;
  p.top_k = 40;
  p.seed = seed;
  return p;
}

std::vector<pipeline::SequenceRequest> requests(const std::vector<int32_t>& prompt, uint64_t first_seed) {
  std::vector<pipeline::SequenceRequest> out;
  for (int i = 0; i < kSeeds; ++i) {
    pipeline::SequenceRequest r;
    r.seq = i;
    r.tokens = prompt;
    r.max_new_tokens = kNewTokens;
    r.prompt_key = 1;
    r.sampling = sampling(first_seed + static_cast<uint64_t>(i));
    out.push_back(std::move(r));
  }
  return out;
}

// P(X >= x) for X chi-square with df degrees of freedom: 1 - the regularized lower incomplete gamma
// P(df/2, x/2), summed from its power series (it converges for every x; the terms shrink once n > x).
double chi_square_survival(double x, int df) {
  if (x <= 0.0) return 1.0;
  const double a = 0.5 * df, h = 0.5 * x;
  double term = 1.0 / a, sum = term;
  for (int n = 1; n < 100000 && term > sum * 1e-17; ++n) {
    term *= h / (a + n);
    sum += term;
  }
  const double lower = std::exp(std::log(sum) + a * std::log(h) - h - std::lgamma(a));
  return std::max(0.0, 1.0 - lower);
}

// The p-value of the chi-square test that two samples of tokens come from one distribution: a table of
// 2 rows (the samples) by the tokens seen, sparse tokens merged into one bin.
double homogeneity_p_value(const std::vector<int32_t>& first, const std::vector<int32_t>& second) {
  std::map<int32_t, std::pair<int, int>> counts;
  for (int32_t t : first) counts[t].first++;
  for (int32_t t : second) counts[t].second++;
  std::vector<std::pair<int, int>> bins;
  std::pair<int, int> merged{0, 0};
  for (const auto& [token, c] : counts) {
    if (c.first + c.second >= kMinPooledCount) {
      bins.push_back(c);
    } else {
      merged.first += c.first;
      merged.second += c.second;
    }
  }
  if (merged.first + merged.second > 0) bins.push_back(merged);
  if (bins.size() < 2) return 1.0;  // one bin: nothing to compare
  const double n1 = static_cast<double>(first.size()), n2 = static_cast<double>(second.size()), n = n1 + n2;
  double stat = 0.0;
  for (const auto& [a, b] : bins) {
    const double pooled = a + b;
    const double e1 = pooled * n1 / n, e2 = pooled * n2 / n;
    stat += (a - e1) * (a - e1) / e1 + (b - e2) * (b - e2) / e2;
  }
  return chi_square_survival(stat, static_cast<int>(bins.size()) - 1);
}

// The tokens at each compared position, one per sequence.
std::map<size_t, std::vector<int32_t>> by_position(const std::vector<std::vector<int32_t>>& outputs) {
  std::map<size_t, std::vector<int32_t>> out;
  for (const auto& g : outputs)
    for (size_t pos : kPositions)
      if (pos < g.size()) out[pos].push_back(g[pos]);
  return out;
}

// Whether the two samples differ by the test: some position's p-value below its share of the level.
bool homogeneity_rejected(const std::vector<std::vector<int32_t>>& a, const std::vector<std::vector<int32_t>>& b,
                          const std::string& what) {
  const auto pa = by_position(a), pb = by_position(b);
  bool rejected = false;
  for (size_t pos : kPositions) {
    const double p = homogeneity_p_value(pa.at(pos), pb.at(pos));
    std::printf("%s, position %zu: p = %.3g\n", what.c_str(), pos, p);
    rejected = rejected || p < kSignificance / static_cast<double>(kPositions.size());
  }
  return rejected;
}

std::vector<std::vector<int32_t>> generated(const std::vector<pipeline::SequenceOutcome>& outcomes) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& o : outcomes) out.push_back(o.generated);
  return out;
}

// A deliberately wrong verification, simulated on the model's own rows: every drafted token is kept
// without a draw, then the row after them draws as plain decoding does. The drafts are prompt lookup's,
// as long as the scheduler's first verification drafts (its acceptance prior pays for 3 tokens). The
// drafts are deterministic, so many seeds reach the same history: its last row is computed once.
std::vector<std::vector<int32_t>> always_accept(glacier::testing::EngineHarness& h, const std::vector<int32_t>& prompt,
                                                uint64_t first_seed) {
  compute::Sampler sampler(h.cfg.n_vocab);
  std::map<std::vector<int32_t>, std::vector<float>> last_rows;
  auto last_row = [&](const std::vector<int32_t>& history) -> const std::vector<float>& {
    auto it = last_rows.find(history);
    if (it == last_rows.end()) {
      const std::vector<float> logits = h.all_logits(history);
      it = last_rows.emplace(history, std::vector<float>(logits.end() - h.cfg.n_vocab, logits.end())).first;
    }
    return it->second;
  };
  std::vector<std::vector<int32_t>> out;
  std::vector<int32_t> draft;
  for (int i = 0; i < kSeeds; ++i) {
    const compute::SamplingParams p = sampling(first_seed + static_cast<uint64_t>(i));
    std::vector<int32_t> history = prompt, gen;
    auto draw = [&] {
      const int32_t t = sampler.choose(last_row(history).data(), p, 1, static_cast<int32_t>(gen.size())).token;
      gen.push_back(t);
      history.push_back(t);
    };
    draw();
    while (static_cast<int32_t>(gen.size()) < kNewTokens) {
      const int32_t room = std::min(3, kNewTokens - static_cast<int32_t>(gen.size()) - 1);
      pipeline::lookup_draft(history, room, draft);
      for (int32_t t : draft) {
        gen.push_back(t);
        history.push_back(t);
      }
      draw();
    }
    out.push_back(gen);
  }
  return out;
}

// The survival function against tabulated chi-square quantiles (the 5% and 0.1% points) and a closed form
// (df 2: exp(-x / 2)).
TEST(SpeculativeSampling, ChiSquareSurvivalMatchesTables) {
  EXPECT_NEAR(chi_square_survival(3.841459, 1), 0.05, 1e-6);
  EXPECT_NEAR(chi_square_survival(11.070498, 5), 0.05, 1e-6);
  EXPECT_NEAR(chi_square_survival(29.588298, 10), 0.001, 1e-7);
  EXPECT_NEAR(chi_square_survival(7.0, 2), std::exp(-3.5), 1e-12);
}

TEST(SpeculativeSampling, StoriesTokensFollowTheModelsDistribution) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  glacier::testing::EngineHarness h(model, 256, kSlots);
  const std::vector<int32_t> prompt = h.tok->encode(kPrompt, true, false);
  // Independent samples: different seeds with and without speculation (with the same seeds the tokens
  // would be the same, Sampler::verify, which says nothing about distributions).
  pipeline::SpeculationCounts counts;
  const auto spec = generated(h.run(requests(prompt, 1), 0, 2, 4, &counts));
  const auto off = generated(h.run(requests(prompt, 1 + kSeeds)));
  std::printf("speculation: %lld verifications, %lld drafted, %lld accepted, %lld ended at a rejection\n",
              static_cast<long long>(counts.verifications), static_cast<long long>(counts.drafted),
              static_cast<long long>(counts.accepted), static_cast<long long>(counts.rejected));
  // Both branches of the rule taken many times.
  EXPECT_GT(counts.accepted, kSeeds / 10);
  EXPECT_GT(counts.rejected, kSeeds / 10);
  EXPECT_FALSE(homogeneity_rejected(spec, off, "lookup vs off"));
  // The test's power: the wrong rule, on a third set of seeds, against the same plain sample.
  EXPECT_TRUE(homogeneity_rejected(always_accept(h, prompt, 1 + 2 * kSeeds), off, "always-accept vs off"));
}

}  // namespace
