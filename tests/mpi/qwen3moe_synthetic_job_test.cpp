// A tiny glacier_mkmodel qwen3moe file at q8_0 (quantized stacked experts, a head width other than n_embd / n_head)
// as a whole job: 2 ranks as 2 stages, 2 ranks as 1 stage x --expert-parallel 2 and 4 ranks as 2 stages x
// --expert-parallel 2 write the JSONL of one rank byte for byte, so the written layout splits by layer and by expert.
#include <gtest/gtest.h>

#include <regex>

#include "common/golden_models.h"
#include "common/job_runner.h"
#include "common/test_env.h"
#include "model/synthetic_model.h"

namespace {

// The logged MiB figures are rounded to 0.1; a stage of this model holds 1.6 MiB of experts (2 layers x 3 x 64 x
// 256 x 16 at 34/32 bytes) or more, so a half share reads between 0.75 / 1.65 = 0.45 and 0.85 / 1.55 = 0.55.
constexpr double kShareTolerance = 0.06;

const std::string kPrompts = std::string(GLACIER_SOURCE_DIR) + "/tests/data/stories_prompts.jsonl";

std::string write_model(const std::string& vocab, const std::string& dir) {
  glacier::model::SyntheticModelSpec s = glacier::testing::tiny_with_vocab(vocab);
  s.arch = "qwen3moe";
  s.n_layer = 4;  // two stages of two layers
  s.weight_type = glacier::kernels::WeightType::Q8_0;
  s.qwen3moe = {.head_dim = 32, .n_expert = 16, .n_expert_used = 2, .n_ff_expert = 256};
  const std::string path = dir + "/qwen3moe-q8_0.gguf";
  glacier::model::write_synthetic_model(s, path);
  return path;
}

struct Outputs {
  std::string jsonl;  // the JSONL output's bytes
  std::string log;
};

Outputs run_job(const std::string& model, const std::string& dir, int np, const std::string& extra, const std::string& name) {
  const std::string out = dir + "/" + name + ".jsonl";
  auto run = glacier::testing::run_glacier(np, "--model " + model + " --prompts " + kPrompts + " --jsonl " + out +
                                                   " --max-tokens 16 " + extra);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  if (run.exit_code != 0) return {};
  return {glacier::testing::read_text(out), run.output};
}

// The expert share each rank logs ("rank R holds X of its layers' Y MiB of expert weights"): X / Y per rank.
std::vector<double> held_expert_shares(const std::string& log) {
  std::vector<double> out;
  const std::regex line(R"(holds ([0-9.]+) of its layers' ([0-9.]+) MiB of expert weights)");
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it)
    out.push_back(std::stod((*it)[1]) / std::stod((*it)[2]));
  return out;
}

TEST(Qwen3MoeSyntheticJob, StagesAndExpertSplitsWriteOneRanksJsonlByteForByte) {
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  const std::string dir = glacier::testing::scratch_dir("qwen3moe-synthetic-job");
  const std::string model = write_model(vocab, dir);
  const std::string one = run_job(model, dir, 1, "", "np1").jsonl;
  ASSERT_FALSE(glacier::testing::read_generated(dir + "/np1.jsonl").tokens.empty()) << "1 rank generated nothing:\n" << one;
  const struct {
    int np;
    const char* extra;
    const char* name;
  } layouts[] = {{2, "", "np2_stages"}, {2, "--expert-parallel 2", "np2_ep2"}, {4, "--expert-parallel 2", "np4_stages2_ep2"}};
  for (const auto& l : layouts) {
    const std::string what = std::to_string(l.np) + " ranks " + l.extra;
    const Outputs o = run_job(model, dir, l.np, l.extra, l.name);
    glacier::testing::expect_same_jsonl(one, o.jsonl, "1 rank", what);
    // With the experts split, every rank holds half of its layers' expert bytes (figures rounded to 0.1 MiB).
    if (std::string(l.extra).empty()) continue;
    const std::vector<double> shares = held_expert_shares(o.log);
    EXPECT_EQ(shares.size(), static_cast<size_t>(l.np)) << what << "\n" << o.log;
    for (double share : shares) EXPECT_NEAR(share, 0.5, kShareTolerance) << what;
  }
}

}  // namespace
