// Perplexity figures on hand-computed cases: running values, llama-perplexity's standard error, the
// printed lines, and the /perplexity group's round trip through a results file.
#include <gtest/gtest.h>

#include <cmath>

#include "app/perplexity.h"
#include "common/input_error.h"
#include "common/test_env.h"
#include "io/hdf5_perplexity.h"
#include "io/hdf5_results.h"
#include "util/error.h"

namespace {

using glacier::testing::expect_input_error;

// The sums are of three small doubles: exact up to the last bit or two.
constexpr double kExact = 1e-12;

TEST(Perplexity, RunningValuesAndStandardErrorByHand) {
  // NLLs 1, 2 | 3: chunk 1's mean is 1.5, the whole text's 2. E[v^2] = 14/3, so the population
  // variance is 14/3 - 4 = 2/3 and the standard error sqrt((2/3) / (3 - 1)) = sqrt(1/3).
  const auto r = glacier::app::combine_perplexity({{-1.0f, -2.0f}, {-3.0f}});
  ASSERT_EQ(r.chunks.size(), 2u);
  EXPECT_NEAR(r.chunks[0].nll_sum, 3.0, kExact);
  EXPECT_EQ(r.chunks[0].n_scored, 2);
  EXPECT_NEAR(r.chunks[0].running_ppl, std::exp(1.5), kExact);
  EXPECT_NEAR(r.chunks[1].nll_sum, 3.0, kExact);
  EXPECT_EQ(r.chunks[1].n_scored, 1);
  EXPECT_NEAR(r.chunks[1].running_ppl, std::exp(2.0), kExact);
  EXPECT_EQ(r.n_scored, 3);
  EXPECT_NEAR(r.mean_nll, 2.0, kExact);
  EXPECT_NEAR(r.ppl, std::exp(2.0), kExact);
  EXPECT_NEAR(r.nll_stderr, std::sqrt(1.0 / 3.0), kExact);
  EXPECT_NEAR(r.ppl_stderr, std::exp(2.0) * std::sqrt(1.0 / 3.0), kExact);
}

TEST(Perplexity, StandardErrorIsUndefinedWithoutSpread) {
  const auto one = glacier::app::combine_perplexity({{-1.0f}});
  EXPECT_TRUE(std::isnan(one.ppl_stderr));
  const auto flat = glacier::app::combine_perplexity({{-0.5f, -0.5f}, {-0.5f}});
  EXPECT_TRUE(std::isnan(flat.nll_stderr));
  EXPECT_EQ(glacier::app::format_final_estimate(flat),
            "Final estimate: PPL = 1.6487 (no standard error: 3 scored tokens without spread)");
}

TEST(Perplexity, PrintsLikeLlamaPerplexity) {
  EXPECT_EQ(glacier::app::format_running_ppl(1, 3.32659515), "[1]3.3266,");
  EXPECT_EQ(glacier::app::format_running_ppl(18, 4.64808588), "[18]4.6481,");
  const auto r = glacier::app::combine_perplexity({{-1.0f, -2.0f}, {-3.0f}});
  // e^2 = 7.389056, e^2 * sqrt(1/3) = 4.266073
  EXPECT_EQ(glacier::app::format_final_estimate(r), "Final estimate: PPL = 7.3891 +/- 4.26607");
}

TEST(Perplexity, JsonCarriesChunksAndNullForAnUndefinedError) {
  glacier::app::PerplexityPlan plan;
  plan.n_ctx = 8;
  plan.n_chunk = 1;
  plan.n_tokens_text = 9;
  const auto j = glacier::app::perplexity_json(plan, glacier::app::combine_perplexity({{-1.0f}}));
  EXPECT_TRUE(j["ppl_stderr"].is_null());
  ASSERT_EQ(j["chunks"].size(), 1u);
  EXPECT_EQ(j["chunks"][0]["n_scored"], 1);
  EXPECT_DOUBLE_EQ(j["chunks"][0]["mean_nll"].get<double>(), 1.0);
}

TEST(PerplexityFile, GroupRoundTripsThroughAResultsFile) {
  const std::string path = glacier::testing::scratch_dir("app_perplexity") + "/r.h5";
  { glacier::io::ResultsFile f(path, glacier::io::ResultsFile::Mode::Create); }
  const auto before = glacier::io::read_root_attributes(path);
  glacier::app::PerplexityPlan plan;
  plan.n_ctx = 6;
  plan.n_chunk = 2;
  plan.n_tokens_text = 13;
  const std::vector<std::vector<float>> lps = {{-1.0f, -2.0f}, {-3.0f, -0.25f}};
  const auto r = glacier::app::combine_perplexity(lps);
  glacier::io::write_perplexity(path, glacier::app::perplexity_table(plan, r, lps));
  const auto t = glacier::io::read_perplexity(path);
  EXPECT_EQ(t.n_ctx, 6);
  EXPECT_EQ(t.n_tokens_text, 13);
  EXPECT_EQ(t.n_scored, 4);
  EXPECT_DOUBLE_EQ(t.ppl, r.ppl);
  EXPECT_DOUBLE_EQ(t.ppl_stderr, r.ppl_stderr);
  EXPECT_EQ(t.chunk_nll_sum, (std::vector<double>{3.0, 3.25}));
  EXPECT_EQ(t.chunk_n_scored, (std::vector<int64_t>{2, 2}));
  EXPECT_DOUBLE_EQ(t.chunk_running_ppl[1], r.ppl);
  EXPECT_EQ(t.token_nll, (std::vector<std::vector<float>>{{1.0f, 2.0f}, {3.0f, 0.25f}}));
  // The provenance written before stays: the group sits beside the root attributes.
  const auto after = glacier::io::read_root_attributes(path);
  EXPECT_EQ(after.size(), before.size());
  EXPECT_EQ(std::get<int64_t>(after.at("glacier_results_format")), std::get<int64_t>(before.at("glacier_results_format")));
}

TEST(PerplexityFile, MissingGroupIsRefusedNamingIt) {
  const std::string path = glacier::testing::scratch_dir("app_perplexity_none") + "/r.h5";
  { glacier::io::ResultsFile f(path, glacier::io::ResultsFile::Mode::Create); }
  expect_input_error([&] { glacier::io::read_perplexity(path); }, {"/perplexity"});
}

}  // namespace
