// --mode score end to end: scoring the continuation a greedy run generated gives greedy = true and
// the very log-probs the generate run reported (bitwise: scoring computes every position in one
// batch, generation one token at a time, and the kernels do not depend on the batch).
#include <gtest/gtest.h>

#include <fstream>

#include "common/job_runner.h"
#include "common/test_env.h"

namespace {

class JobScore : public ::testing::TestWithParam<int> {};

TEST_P(JobScore, ScoringAGreedyContinuationReproducesItsLogprobs) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const int np = GetParam();
  const std::string dir = glacier::testing::scratch_dir("score" + std::to_string(np));
  {
    std::ofstream p(dir + "/gen.jsonl");
    p << R"({"id": "a", "prompt": "Once upon a time"})" << "\n" << R"({"id": "b", "prompt": "The little dog"})" << "\n";
  }
  auto gen = glacier::testing::run_glacier(np, "--model " + model + " --prompts " + dir + "/gen.jsonl --jsonl " + dir +
                                                   "/gen.out.jsonl --max-tokens 12");
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  const auto generated = glacier::testing::read_jsonl(dir + "/gen.out.jsonl");
  ASSERT_EQ(generated.size(), 2u);
  {
    std::ofstream p(dir + "/score.jsonl");
    const char* contexts[] = {"Once upon a time", "The little dog"};
    for (size_t i = 0; i < 2; ++i)
      p << nlohmann::json{{"id", generated[i]["id"]}, {"context", contexts[i]}, {"continuation", generated[i]["text"]}}.dump()
        << "\n";
    // A continuation the model would not produce greedily.
    p << R"({"id": "c", "context": "Once upon a time", "continuation": " the moon ate a green car"})" << "\n";
  }
  auto score = glacier::testing::run_glacier(np, "--model " + model + " --mode score --prompts " + dir +
                                                     "/score.jsonl --jsonl " + dir + "/score.out.jsonl --out " + dir + "/s.h5");
  ASSERT_EQ(score.exit_code, 0) << score.output;
  const auto scored = glacier::testing::read_jsonl(dir + "/score.out.jsonl");
  ASSERT_EQ(scored.size(), 3u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(scored[i]["status"], "ok") << scored[i].dump();
    EXPECT_EQ(scored[i]["tokens"], generated[i]["tokens"]) << "the continuation tokenizes back to the generated tokens";
    EXPECT_EQ(scored[i]["logprobs"], generated[i]["logprobs"]);
    EXPECT_TRUE(scored[i]["greedy"].get<bool>());
    double sum = 0;
    for (double lp : generated[i]["logprobs"]) sum += static_cast<float>(lp);
    EXPECT_NEAR(scored[i]["sum_logprob"].get<double>(), sum, 1e-4);
  }
  EXPECT_FALSE(scored[2]["greedy"].get<bool>());
  EXPECT_LT(scored[2]["sum_logprob"].get<double>(), scored[0]["sum_logprob"].get<double>());
}

INSTANTIATE_TEST_SUITE_P(Ranks, JobScore, ::testing::Values(1, 2),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

}  // namespace
