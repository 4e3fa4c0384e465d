// The library API runs the engine glacier_mpi runs: the same prompt lines give the same tokens and
// log-prob bits through Engine::run as through a one-rank and a two-stage glacier_mpi job.
#include <glacier/engine.h>

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "common/job_runner.h"
#include "common/test_env.h"

namespace {

constexpr int kJobTimeLimitS = 300;

TEST(ApiEngineMatchesJob, SamePromptLinesGiveTheSameTokensAndLogprobBits) {
  const std::string model = glacier::testing::shared_path("models/stories260K.gguf");
  if (model.empty()) GTEST_SKIP() << "models/stories260K.gguf not found under GLACIER_SHARED_DIR (../shared)";
  const std::vector<std::string> lines = {
      R"({"id": "greedy", "prompt": "Once upon a time", "max_tokens": 20})",
      R"({"id": "sampled", "prompt": "The little dog", "max_tokens": 20, "temperature": 0.8, "top_p": 0.9, "seed": 11})",
      R"({"id": "stopped", "prompt": "Lily and Tom", "max_tokens": 30, "stop": ["park"]})",
      R"({"id": "penalised", "prompt": "One day", "max_tokens": 16, "temperature": 0.7, "seed": 3, "frequency_penalty": 0.5})",
  };
  const std::string dir = glacier::testing::scratch_dir("api_matches_job");
  {
    std::ofstream f(dir + "/p.jsonl");
    for (const std::string& l : lines) f << l << "\n";
  }

  glacier::EngineOptions options;
  options.threads = 1;
  options.slots = 2;
  auto engine = glacier::Engine::open(model, options);
  std::vector<glacier::Request> batch(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) batch[i].json = lines[i];
  glacier::testing::GeneratedById from_api;
  engine->run(batch, [&](glacier::Result&& r) {
    ASSERT_TRUE(r.ok) << r.id << ": " << r.error;
    from_api.tokens[r.id] = std::vector<int>(r.tokens.begin(), r.tokens.end());
    std::vector<uint32_t> bits(r.logprobs.size());
    if (!bits.empty()) std::memcpy(bits.data(), r.logprobs.data(), bits.size() * sizeof(float));
    from_api.logprob_bits[r.id] = bits;
  });
  ASSERT_EQ(from_api.tokens.size(), lines.size());

  for (int np : {1, 2}) {
    SCOPED_TRACE("glacier_mpi on " + std::to_string(np) + " ranks");
    const std::string out = dir + "/r" + std::to_string(np) + ".jsonl";
    const auto job = glacier::testing::run_glacier(
        np, "--model " + model + " --prompts " + dir + "/p.jsonl --jsonl " + out + " --threads 1 --slots 2",
        kJobTimeLimitS);
    ASSERT_EQ(job.exit_code, 0) << job.output;
    const glacier::testing::GeneratedById from_job = glacier::testing::read_generated(out);
    EXPECT_EQ(from_job.tokens, from_api.tokens);
    EXPECT_EQ(from_job.logprob_bits, from_api.logprob_bits);
  }
}

}  // namespace
