// Shard sets through whole jobs: a model cut by glacier_shard runs on as many ranks as it has stages (or a
// multiple, as replicas) with tokens and log-probs bit for bit those of the whole file, its results carry the
// whole file's digest (so either resumes the other), expert-parallel members of a stage open its file, and a
// set that does not fit the rank count, options that would choose another split, or one stage's file given
// as the model are refused on every rank.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/job_runner.h"
#include "common/test_env.h"
#include "model/synthetic_model.h"

namespace {

const std::string kPrompts = std::string(GLACIER_SOURCE_DIR) + "/tests/data/stories_prompts.jsonl";

struct ShardedModel {
  std::string dir, whole, shards;
};

// `split`: glacier_shard's choice of the split ("--ranks N" or "--layers ...").
ShardedModel cut_model(const std::string& name, const glacier::model::SyntheticModelSpec& spec,
                       const std::string& split) {
  ShardedModel m;
  m.dir = glacier::testing::scratch_dir(name);
  m.whole = m.dir + "/whole.gguf";
  glacier::model::write_synthetic_model(spec, m.whole);
  m.shards = m.dir + "/shards";
  const std::string cmd = std::string(GLACIER_BUILD_DIR) + "/glacier_shard --model " + m.whole + " " + split +
                          " --out " + m.shards + " > " + m.dir + "/shard.log 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return m;
}

// The tiny Llama with five layers, Q8_0, cut into `stages` stages by weight bytes.
ShardedModel cut_model(const std::string& name, int stages) {
  glacier::model::SyntheticModelSpec s = glacier::model::synthetic_preset("tiny");
  s.n_layer = 5;
  s.weight_type = glacier::kernels::WeightType::Q8_0;
  return cut_model(name, s, "--ranks " + std::to_string(stages));
}

glacier::testing::GeneratedById run_job(const ShardedModel& m, const std::string& model, int np,
                                        const std::string& tag, const std::string& extra = "") {
  const std::string out = m.dir + "/" + tag + ".jsonl";
  const auto run = glacier::testing::run_glacier(np, "--model " + model + " --prompts " + kPrompts + " --jsonl " + out +
                                                         " --max-tokens 12 --out " + m.dir + "/" + tag + ".h5 " + extra);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return glacier::testing::read_generated(out);
}

TEST(JobShards, AShardSetGivesTheWholeFilesTokensAndLogProbsBitForBit) {
  const ShardedModel m = cut_model("job-shards", 3);
  const auto whole = run_job(m, m.whole, 3, "whole", "--layers 0:1,1:3,3:5");
  const auto sharded = run_job(m, m.shards, 3, "sharded");
  ASSERT_FALSE(whole.tokens.empty());
  EXPECT_EQ(sharded.tokens, whole.tokens);
  EXPECT_EQ(sharded.logprob_bits, whole.logprob_bits);
  // Six ranks: two replicas of the three stages.
  const auto replicated = run_job(m, m.shards, 6, "replicated", "--replicas auto");
  EXPECT_EQ(replicated.tokens, whole.tokens);
  EXPECT_EQ(replicated.logprob_bits, whole.logprob_bits);
  // The sharded run resumes the whole file's results: same model digest.
  const auto resumed = glacier::testing::run_glacier(
      3, "--model " + m.shards + " --prompts " + kPrompts + " --max-tokens 12 --out " + m.dir + "/whole.h5 --resume");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
}

// Expert-parallel members open their leader's stage file and keep their share of its experts: 2 stages x
// --expert-parallel 2 on 4 ranks gives the whole file's bits on 2 stages; 2 ranks cannot hold 2 stages x 2.
TEST(JobShards, ExpertParallelMembersOfAShardSetGiveTheWholeFilesBits) {
  glacier::model::SyntheticModelSpec s = glacier::model::synthetic_preset("tiny");
  s.arch = "deepseek2";
  s.n_head_kv = s.n_head;  // latent attention: every head has its own key and value
  s.n_layer = 4;            // one leading dense layer, then three MoE layers
  const ShardedModel m = cut_model("job-shards-experts", s, "--layers 0:2,2:4");
  const auto whole = run_job(m, m.whole, 2, "whole", "--layers 0:2,2:4");
  const auto sharded = run_job(m, m.shards, 4, "sharded", "--expert-parallel 2");
  ASSERT_FALSE(whole.tokens.empty());
  EXPECT_EQ(sharded.tokens, whole.tokens);
  EXPECT_EQ(sharded.logprob_bits, whole.logprob_bits);
  const auto refused = glacier::testing::run_glacier(2, "--model " + m.shards + " --prompts " + kPrompts +
                                                            " --jsonl " + m.dir + "/refused.jsonl --expert-parallel 2");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("expected a rank count that is a multiple of its stages x --expert-parallel (2 x 2), "
                                "found 2 ranks"),
            std::string::npos)
      << refused.output;
}

TEST(JobShards, MismatchedRanksOptionsAndLoneShardsAreRefused) {
  const ShardedModel m = cut_model("job-shards-refused", 3);
  struct Case {
    int np;
    std::string model, extra, expected;
  };
  const Case cases[] = {
      {2, m.shards, "", "a multiple of its stages, found 2 ranks"},
      {3, m.shards, "--layers 0:2,2:4,4:5", "--layers / --partition / --partition-from"},
      {6, m.shards, "--replicas 3", "option --replicas: expected 2 or auto"},
      {1, m.shards + "/stage-0-of-3.gguf", "", "one stage of a shard set"},
  };
  for (const Case& c : cases) {
    const auto run = glacier::testing::run_glacier(
        c.np, "--model " + c.model + " --prompts " + kPrompts + " --jsonl " + m.dir + "/refused.jsonl " + c.extra);
    EXPECT_NE(run.exit_code, 0) << c.expected;
    EXPECT_NE(run.output.find(c.expected), std::string::npos) << run.output;
  }
}

}  // namespace
