// Comparison of an engine's logits and greedy tokens with a llama_greedy_dump reference.
#include "common/greedy_dump_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "app/sha256.h"
#include "common/test_env.h"

namespace glacier::testing {

std::vector<pipeline::SequenceRequest> reference_requests(const nlohmann::json& cases,
                                                          std::optional<int32_t> max_new_tokens) {
  std::vector<pipeline::SequenceRequest> requests;
  for (size_t k = 0; k < cases.size(); ++k) {
    pipeline::SequenceRequest r;
    r.seq = static_cast<int32_t>(k);
    r.tokens = cases[k]["prompt_ids"].get<std::vector<int32_t>>();
    r.max_new_tokens = max_new_tokens.value_or(static_cast<int32_t>(cases[k]["generated_ids"].size()));
    requests.push_back(std::move(r));
  }
  return requests;
}

std::vector<float> teacher_forced_logits(EngineHarness& eng, const std::vector<int32_t>& prompt,
                                         const std::vector<int32_t>& generated) {
  std::vector<int32_t> forced = prompt;
  forced.insert(forced.end(), generated.begin(), generated.end() - 1);
  return eng.all_logits(forced);
}

double max_abs_deviation(const float* row, const nlohmann::json& expected_row, int32_t n_vocab) {
  double worst = 0.0;
  for (int32_t v = 0; v < n_vocab; ++v)
    worst = std::max(worst, std::abs(static_cast<double>(row[v]) - expected_row[v].get<double>()));
  return worst;
}

void check_against_greedy_dump(EngineHarness& eng, const nlohmann::json& cases, const std::string& label,
                               const GreedyDumpTolerances& tol) {
  ASSERT_FALSE(cases.empty()) << label << ": the reference holds no prompts";
  const auto outcomes = eng.run(reference_requests(cases));
  const int32_t n_vocab = eng.cfg.n_vocab;
  for (size_t k = 0; k < cases.size(); ++k) {
    ASSERT_EQ(cases[k]["n_vocab"].get<int32_t>(), n_vocab);
    const auto prompt = cases[k]["prompt_ids"].get<std::vector<int32_t>>();
    const auto expected = cases[k]["generated_ids"].get<std::vector<int32_t>>();
    const auto& steps = cases[k]["steps"];
    ASSERT_EQ(steps.size(), expected.size());
    const std::vector<float> logits = teacher_forced_logits(eng, prompt, expected);
    auto deviation = [&](size_t row, const nlohmann::json& top5) {
      double dev = 0.0;
      for (const auto& entry : top5)
        dev = std::max(dev, std::abs(double(logits[row * n_vocab + entry[0].get<int32_t>()]) - entry[1].get<double>()));
      return dev;
    };
    const auto& prompt_top5 = cases[k]["prompt_top5"];
    ASSERT_EQ(prompt_top5.size(), prompt.size());
    // Positions in order: prompt positions, then the generated steps past the prompt's last one.
    size_t first_flip = SIZE_MAX;
    double worst_before = 0.0, worst_after = 0.0;
    const size_t n_rows = prompt.size() + expected.size() - 1;
    for (size_t row = 0; row < n_rows; ++row) {
      const nlohmann::json& top5 = row < prompt.size() ? prompt_top5[row] : steps[row - prompt.size() + 1]["top5"];
      const double dev = deviation(row, top5);
      if (first_flip == SIZE_MAX && dev > tol.logit) first_flip = row;
      double& worst = row < first_flip ? worst_before : worst_after;
      worst = std::max(worst, dev);
      const double margin = top5[0][1].get<double>() - top5[1][1].get<double>();
      if (row < first_flip && margin > tol.logit) {
        const float* r = logits.data() + row * size_t(n_vocab);
        EXPECT_EQ(std::max_element(r, r + n_vocab) - r, top5[0][0].get<int32_t>()) << label << " prompt " << k << " row " << row;
      }
    }
    EXPECT_GT(first_flip, 0u) << label << " prompt " << k << ": the first position is off by " << worst_after;
    EXPECT_LE(worst_after, tol.rounding_flip) << label << " prompt " << k << " from row " << first_flip;
    // The free-running generation follows llama.cpp while both are decidable and no flip intervened.
    const size_t flip_step =
        first_flip == SIZE_MAX ? expected.size() : std::max<size_t>(first_flip + 1, prompt.size()) - prompt.size();
    size_t compared = 0;
    while (compared < std::min(flip_step, expected.size()) && steps[compared]["margin"].get<double>() > tol.logit)
      ++compared;
    const auto& got = outcomes[k].generated;
    ASSERT_GE(got.size(), compared) << label << " prompt " << k;
    for (size_t i = 0; i < compared; ++i) ASSERT_EQ(got[i], expected[i]) << label << " prompt " << k << " step " << i;
    std::printf("%s prompt %zu: %zu of %zu greedy tokens compared, max |dlogit| %.3g over %zu rows", label.c_str(), k,
                compared, expected.size(), worst_before, std::min(first_flip, n_rows));
    if (first_flip != SIZE_MAX) std::printf("; rounding flip at row %zu, %.3g after it", first_flip, worst_after);
    std::printf("\n");
  }
}

void check_golden_run(const GoldenRun& run, const GreedyDumpTolerances& tol,
                      const std::function<void(const model::ModelConfig&)>& expect_config) {
  ASSERT_EQ(app::sha256_file(run.path), run.sha256) << run.label << ": the model file is not the referenced one";
  EngineHarness eng(run.path, run.ctx);
  if (expect_config) expect_config(eng.cfg);
  const nlohmann::json cases = read_json(golden_data_dir() + "/" + run.reference);
  ASSERT_EQ(cases.size(), run.prompts) << run.reference;
  check_against_greedy_dump(eng, cases, run.label, tol);
}

void expect_golden_granite_scales(const model::ModelConfig& c) {
  EXPECT_EQ(c.embedding_scale, kGoldenGraniteScales.embedding_scale);
  EXPECT_EQ(c.residual_scale, kGoldenGraniteScales.residual_scale);
  EXPECT_EQ(c.query_scale, kGoldenGraniteScales.attention_scale);
  EXPECT_EQ(c.logit_scale, kGoldenGraniteScales.logit_scale);
}

}  // namespace glacier::testing
