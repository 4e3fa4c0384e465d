// The public library API (include/glacier/engine.h), used as another project would: open errors,
// per-request errors that fail only their request, batch invariance, samples and scoring.
#include <glacier/engine.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "common/process.h"
#include "common/test_env.h"

namespace {

using glacier::Engine;
using glacier::Request;
using glacier::Result;

std::string stories_model() { return glacier::testing::shared_path("models/stories260K.gguf"); }

#define REQUIRE_STORIES(path)                                                          \
  const std::string path = stories_model();                                            \
  if (path.empty()) GTEST_SKIP() << "models/stories260K.gguf not found under GLACIER_SHARED_DIR (../shared)"

// Runs a batch and returns its results ordered by (index, sample); every (index, sample) must come once.
std::vector<Result> run_batch(Engine& engine, const std::vector<Request>& batch) {
  std::map<std::pair<size_t, int>, Result> by_key;
  engine.run(batch, [&](Result&& r) {
    const auto key = std::make_pair(r.index, r.sample);
    EXPECT_EQ(by_key.count(key), 0u) << "result for request " << r.index << " sample " << r.sample << " came twice";
    by_key.emplace(key, std::move(r));
  });
  std::vector<Result> out;
  for (auto& [key, r] : by_key) out.push_back(std::move(r));
  return out;
}

Request prompt_request(const std::string& text, int max_tokens) {
  Request r;
  r.prompt = text;
  r.max_tokens = max_tokens;
  return r;
}

glacier::EngineOptions engine_options(int threads, int slots) {
  glacier::EngineOptions o;
  o.threads = threads;
  o.slots = slots;
  return o;
}

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

std::string open_error(const std::string& path, const glacier::EngineOptions& options = {}) {
  try {
    Engine::open(path, options);
  } catch (const glacier::Error& e) {
    return e.what();
  }
  return "";
}

TEST(ApiEngine, OpenRefusesAMissingModelAndOptionsOutOfRangeByName) {
  const std::string missing = glacier::testing::scratch_dir("api_open") + "/absent.gguf";
  EXPECT_NE(open_error(missing).find(missing), std::string::npos) << open_error(missing);
  EXPECT_EQ(open_error(missing, engine_options(1, 0)), "EngineOptions::slots: expected 1..65536, found 0");
  EXPECT_EQ(open_error(missing, engine_options(-1, 4)), "EngineOptions::threads: expected 0..4096, found -1");
}

TEST(ApiEngine, GreedyBatchAnswersEveryRequestOnceAndMatchesEachRequestRunAlone) {
  REQUIRE_STORIES(model);
  auto engine = Engine::open(model, engine_options(2, 3));
  EXPECT_EQ(engine->info().architecture, "llama");
  const std::vector<std::string> prompts = {"Once upon a time", "Lily and Tom went to the park", "The cat", "One day",
                                            "Tim had a big red ball"};
  std::vector<Request> batch;
  for (const std::string& p : prompts) batch.push_back(prompt_request(p, 12));
  const std::vector<Result> all = run_batch(*engine, batch);
  ASSERT_EQ(all.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(prompts[i]);
    const Result& r = all[i];
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.id, std::to_string(i + 1));
    EXPECT_EQ(r.prompt_tokens, engine->tokenize(prompts[i]));
    EXPECT_EQ(r.logprobs.size(), r.tokens.size());
    EXPECT_LE(r.tokens.size(), 12u);
    EXPECT_EQ(r.text, engine->detokenize(r.tokens));
    // Alone (one slot busy, other batch neighbours): the same bits, since reductions are batch-invariant.
    const std::vector<Result> alone = run_batch(*engine, {batch[i]});
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_EQ(alone[0].tokens, r.tokens);
    EXPECT_EQ(bits(alone[0].logprobs), bits(r.logprobs));
  }
}

TEST(ApiEngine, ABadRequestFailsItselfNamingTheFieldAndTheRestRun) {
  REQUIRE_STORIES(model);
  auto engine = Engine::open(model, engine_options(2, 4));
  std::vector<Request> batch(4);
  batch[0].prompt = "Once upon a time";
  batch[1].prompt = "The dog";
  batch[1].max_tokens = -3;
  batch[2].json = R"({"prompt": "A bird", "max_tokens": 4, "temprature": 0.5})";  // misspelt field
  batch[3].json = R"({"prompt": "A bird", "max_tokens": 4})";
  batch[3].prompt = "both";
  const std::vector<Result> results = run_batch(*engine, batch);
  ASSERT_EQ(results.size(), 4u);
  EXPECT_TRUE(results[0].ok) << results[0].error;
  EXPECT_FALSE(results[1].ok);
  EXPECT_NE(results[1].error.find("request:2"), std::string::npos) << results[1].error;
  EXPECT_NE(results[1].error.find("max_tokens"), std::string::npos) << results[1].error;
  EXPECT_FALSE(results[2].ok);
  EXPECT_NE(results[2].error.find("temprature"), std::string::npos) << results[2].error;
  EXPECT_FALSE(results[3].ok);
  EXPECT_NE(results[3].error.find("Request::json"), std::string::npos) << results[3].error;
}

TEST(ApiEngine, SampleZeroOfNIsTheSampleOfOneAndScoresSumTheirTokens) {
  REQUIRE_STORIES(model);
  auto engine = Engine::open(model, engine_options(2, 4));
  Request one = prompt_request("Once upon a time", 10);
  one.id = "p";
  one.temperature = 0.9;
  one.seed = 7;
  Request three = one;
  three.n = 3;
  const std::vector<Result> a = run_batch(*engine, {one});
  const std::vector<Result> b = run_batch(*engine, {three});
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 3u);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(b[static_cast<size_t>(s)].sample, s);
  EXPECT_EQ(b[0].tokens, a[0].tokens);
  EXPECT_EQ(bits(b[0].logprobs), bits(a[0].logprobs));

  Request score;
  score.context = "Once upon a time";
  score.continuation = ", there was a little girl";
  const std::vector<Result> scored = run_batch(*engine, {score});
  ASSERT_EQ(scored.size(), 1u);
  ASSERT_TRUE(scored[0].ok) << scored[0].error;
  ASSERT_FALSE(scored[0].tokens.empty());
  const double sum = std::accumulate(scored[0].logprobs.begin(), scored[0].logprobs.end(), 0.0);
  // The summed log-prob is accumulated in double from the same floats.
  EXPECT_NEAR(scored[0].sum_logprob, sum, 1e-9);
  EXPECT_LT(scored[0].sum_logprob, 0.0);
}

TEST(ApiEngine, TheExampleProgramRunsABatch) {
  REQUIRE_STORIES(model);
  const std::string out = glacier::testing::scratch_dir("api_example") + "/out.txt";
  glacier::testing::BackgroundProcess example({std::string(GLACIER_BUILD_DIR) + "/glacier_example", model,
                                               "Once upon a time", "The cat"},
                                              out);
  const std::optional<int> code = example.wait_for(120);
  ASSERT_TRUE(code.has_value()) << "the example did not finish in 120 s";
  EXPECT_EQ(*code, 0) << example.output();
  EXPECT_NE(example.output().find("[0] Once upon a time"), std::string::npos) << example.output();
  EXPECT_NE(example.output().find("[1] The cat"), std::string::npos) << example.output();
  EXPECT_NE(example.output().find("[score] sum log-prob"), std::string::npos) << example.output();
}

}  // namespace
