// Goldens at the job level: the synthetic models behind tests/golden/data (new architectures and quant types,
// common/golden_models.h) run as whole glacier_mpi jobs on 1 and 3 ranks from llama.cpp's own prompt token
// ids. Greedy tokens must be llama.cpp's wherever its reference can decide them, and the 3-rank run (2 ranks
// for the 2-layer quant-type models: a rank needs a layer) must give the 1-rank run's tokens and log-probs bit
// for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "app/sha256.h"
#include "common/golden_models.h"
#include "common/job_runner.h"
#include "common/test_env.h"
#include "model/synthetic_model.h"

namespace {

using glacier::testing::GoldenModel;

struct JobGoldenCase {
  const char* name;
  GoldenModel (*model)(const std::string& vocab);
  // The logit error the in-process golden test (tests/golden) allows for this model before a rounding flip:
  // f32 rounding, gemma2's f16 GELU table, or quantized activations summed in another order.
  double logit_tolerance;
};

GoldenModel q4_k_m(const std::string& v) { return glacier::testing::synth_quant_golden(v, glacier::testing::synth_quant_case("q4_k_m")); }
GoldenModel iq4_xs(const std::string& v) { return glacier::testing::synth_quant_golden(v, glacier::testing::synth_quant_case("iq4_xs")); }
GoldenModel q5_0(const std::string& v) { return glacier::testing::synth_quant_golden(v, glacier::testing::synth_quant_case("q5_0")); }

const JobGoldenCase kCases[] = {
    {"granite", glacier::testing::granite_golden, 1e-4},
    {"gemma2", glacier::testing::gemma2_golden, 3e-3},
    {"deepseek2", glacier::testing::deepseek2_v3_golden, 5e-5},
    {"q4_k_m", q4_k_m, 1e-3},
    {"iq4_xs", iq4_xs, 1e-3},
    {"q5_0", q5_0, 1e-3},
};

void PrintTo(const JobGoldenCase& c, std::ostream* os) { *os << c.name; }

class JobGolden : public ::testing::TestWithParam<JobGoldenCase> {};

TEST_P(JobGolden, OneRankAndAPipelineGiveLlamaCppsGreedyTokens) {
  const JobGoldenCase& c = GetParam();
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  const GoldenModel golden = c.model(vocab);
  const std::string dir = glacier::testing::scratch_dir(std::string("job-golden-") + c.name);
  const std::string model = dir + "/model.gguf";
  glacier::model::write_synthetic_model(golden.spec, model);
  ASSERT_EQ(glacier::app::sha256_file(model), golden.sha256) << golden.label << ": not the referenced model";

  const auto cases = glacier::testing::read_json(glacier::testing::golden_data_dir() + "/" + golden.reference);
  ASSERT_FALSE(cases.empty());
  const std::string prompts = dir + "/prompts.jsonl";
  {
    std::ofstream out(prompts);
    for (size_t k = 0; k < cases.size(); ++k) {
      nlohmann::json line = {{"id", "p" + std::to_string(k)},
                             {"prompt_token_ids", cases[k]["prompt_ids"]},
                             {"max_tokens", cases[k]["generated_ids"].size()},
                             {"ignore_eos", true},
                             {"top_logprobs", 2}};
      out << line.dump() << "\n";
    }
  }
  auto run = [&](int np, int ubatch) {
    const std::string out = dir + "/np" + std::to_string(np) + ".jsonl";
    const auto r = glacier::testing::run_glacier(np, "--model " + model + " --prompts " + prompts + " --jsonl " + out +
                                                         " --ubatch " + std::to_string(ubatch));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return glacier::testing::read_generated(out);
  };
  const auto one = run(1, 512);
  const auto several = run(std::min(3, golden.spec.n_layer), 7);  // small micro-batches: prompts split across several
  EXPECT_EQ(several.tokens, one.tokens);
  EXPECT_EQ(several.logprob_bits, one.logprob_bits);

  // Step i is compared while the job's top-2 margin (the difference of its two best log-probs, which is the
  // difference of their logits) agrees with llama.cpp's within the tolerance: a larger gap means a rounding
  // flip moved the logits from there on, and the in-process test then stops comparing tokens too. A token is
  // decidable where llama.cpp's margin exceeds twice the tolerance.
  const auto rows = glacier::testing::read_jsonl(dir + "/np1.jsonl");
  ASSERT_EQ(rows.size(), cases.size());
  size_t decided_total = 0;
  for (const auto& row : rows) {
    const std::string id = row["id"];
    const size_t k = std::stoul(id.substr(1));
    const auto got = row["tokens"].get<std::vector<int>>();
    const auto expected = cases[k]["generated_ids"].get<std::vector<int>>();
    const auto& steps = cases[k]["steps"];
    ASSERT_EQ(got.size(), expected.size()) << golden.label << " " << id;
    size_t decided = 0, agreed = 0;
    for (; agreed < expected.size(); ++agreed) {
      const auto& top2 = row["top_logprobs"][agreed];
      const double margin = top2[0]["logprob"].get<double>() - top2[1]["logprob"].get<double>();
      const double reference_margin = steps[agreed]["margin"].get<double>();
      if (std::abs(margin - reference_margin) > c.logit_tolerance) break;
      if (reference_margin <= 2 * c.logit_tolerance) continue;
      EXPECT_EQ(got[agreed], expected[agreed]) << golden.label << " " << id << " step " << agreed;
      ++decided;
    }
    std::printf("%s %s: margins agree for %zu of %zu steps, %zu greedy tokens decidable and compared\n",
                golden.label.c_str(), id.c_str(), agreed, expected.size(), decided);
    decided_total += decided;
  }
  EXPECT_GT(decided_total, 0u) << golden.label << ": no reference step was decisive, so nothing was compared";
}

INSTANTIATE_TEST_SUITE_P(NewArchsAndTypes, JobGolden, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
