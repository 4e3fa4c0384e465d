// A DeepSeek V3-shaped synthetic model (latent attention, a dense first layer then sigmoid-gated experts,
// tests/golden/data/deepseek2/README.md) run as a whole job on 1 and 3 ranks, with micro-batches of 7 and
// 512 tokens: tokens and log-probs must be bitwise identical, so the latent KV cache, the per-stage layer
// split and the memory check work through the pipeline as they do in one process.
#include <gtest/gtest.h>

#include "common/golden_models.h"
#include "common/job_runner.h"
#include "common/test_env.h"
#include "model/synthetic_model.h"

namespace {

const std::string kPrompts = std::string(GLACIER_SOURCE_DIR) + "/tests/data/stories_prompts.jsonl";

std::string write_model(const std::string& vocab, const std::string& dir) {
  const glacier::model::SyntheticModelSpec s = glacier::testing::deepseek2_v3_golden(vocab).spec;
  const std::string path = dir + "/v3.gguf";
  glacier::model::write_synthetic_model(s, path);
  return path;
}

glacier::testing::GeneratedById run_job(const std::string& model, const std::string& dir, int np, int ubatch) {
  const std::string out = dir + "/np" + std::to_string(np) + "_ub" +
                          std::to_string(ubatch) + ".jsonl";
  auto run = glacier::testing::run_glacier(np, "--model " + model + " --prompts " + kPrompts + " --jsonl " + out +
                                                   " --max-tokens 24 --ubatch " + std::to_string(ubatch));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return glacier::testing::read_generated(out);
}

TEST(DeepSeek2Job, ThreeRanksGiveOneRanksTokensAndLogProbsBitForBit) {
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  const std::string dir = glacier::testing::scratch_dir("deepseek2-job");  // one directory: scratch_dir empties it
  const std::string model = write_model(vocab, dir);
  const auto baseline = run_job(model, dir, 1, 512);
  ASSERT_FALSE(baseline.tokens.empty());
  for (int ubatch : {7, 512}) {
    const auto o = run_job(model, dir, 3, ubatch);
    EXPECT_EQ(o.tokens, baseline.tokens) << "ubatch " << ubatch;
    EXPECT_EQ(o.logprob_bits, baseline.logprob_bits) << "ubatch " << ubatch;
  }
}

}  // namespace
