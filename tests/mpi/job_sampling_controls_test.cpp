// Sampling controls in whole jobs on stories260K (2 ranks): stop_token_ids ends a row at that token,
// logit_bias +100 forces a token, min_tokens holds back the end of generation (with and without
// ignore_eos), include_stop_str_in_output keeps the stop string, and presence/frequency penalties leave
// the first token alone while a repetition penalty changes it (the prompt's tokens count for it); ids
// outside the vocabulary fail their row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/job_runner.h"
#include "common/test_env.h"

namespace {

using glacier::testing::read_jsonl;
using glacier::testing::run_glacier;
using nlohmann::json;

constexpr int kJobTimeLimitS = 60;  // a second of work; the limit only stops a hung job
constexpr int kEos = 2;             // stories260K's end-of-generation token (llama2 vocabulary)
// A token with +100 on its logit: every other token's probability is below e^-80, so log p > -1e-30;
// the bound only needs to tell "forced" from an ordinary choice.
constexpr double kForcedLogprob = -1e-6;
const std::string kPrompt = "Once upon a time";

// Runs the lines (each gets "prompt" and an id "r<i>" added) and returns the rows by id.
std::map<std::string, json> run_rows(const std::string& model, const std::string& name, std::vector<json> lines) {
  const std::string dir = glacier::testing::scratch_dir("sampling-" + name);
  {
    std::ofstream out(dir + "/p.jsonl");
    for (size_t i = 0; i < lines.size(); ++i) {
      std::string id = "r";  // += : GCC 12 warns falsely on "r" + std::to_string(i)
      id += std::to_string(i);
      lines[i]["id"] = id;
      lines[i]["prompt"] = kPrompt;
      out << lines[i].dump() << "\n";
    }
  }
  const auto run = run_glacier(2, "--model " + model + " --prompts " + dir + "/p.jsonl --jsonl " + dir + "/r.jsonl",
                               kJobTimeLimitS);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  std::map<std::string, json> rows;
  for (const json& row : read_jsonl(dir + "/r.jsonl")) rows[row["id"].get<std::string>()] = row;
  EXPECT_EQ(rows.size(), lines.size());
  return rows;
}

std::vector<int> tokens(const json& row) {
  EXPECT_EQ(row["status"], "ok") << row.dump();
  return row.value("tokens", std::vector<int>{});
}
std::vector<float> logprobs(const json& row) { return row["logprobs"].get<std::vector<float>>(); }

TEST(JobSamplingControls, StopTokenIdEndsTheRowAtThatToken) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  auto base = run_rows(model, "stop-base", {{{"max_tokens", 16}}});
  const std::vector<int> greedy = tokens(base["r0"]);
  ASSERT_EQ(greedy.size(), 16u);
  // The first token from the fourth on that did not occur before it: the row must end exactly there.
  auto seen_before = [&greedy](size_t k) {
    return std::find(greedy.begin(), greedy.begin() + static_cast<long>(k), greedy[k]) != greedy.begin() + static_cast<long>(k);
  };
  size_t k = 3;
  while (k < greedy.size() && seen_before(k)) ++k;
  ASSERT_LT(k, greedy.size());
  auto rows = run_rows(model, "stop", {{{"max_tokens", 16}, {"stop_token_ids", {greedy[k], 511}}}});
  const json& r = rows["r0"];
  EXPECT_EQ(r["finish_reason"], "stop");
  EXPECT_EQ(tokens(r), std::vector<int>(greedy.begin(), greedy.begin() + static_cast<long>(k) + 1)) << "the stop token is kept";
  const std::vector<float> lp = logprobs(base["r0"]);
  EXPECT_EQ(logprobs(r), std::vector<float>(lp.begin(), lp.begin() + static_cast<long>(k) + 1)) << "nothing else changes";
}

TEST(JobSamplingControls, LogitBiasForcesAToken) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  auto rows = run_rows(model, "bias", {{{"max_tokens", 8}}, {{"max_tokens", 8}, {"logit_bias", {{"100", 100}}}}});
  EXPECT_NE(tokens(rows["r0"]), std::vector<int>(8, 100)) << "the test needs a token the model does not pick anyway";
  EXPECT_EQ(tokens(rows["r1"]), std::vector<int>(8, 100));
  for (float lp : logprobs(rows["r1"])) EXPECT_GT(lp, kForcedLogprob) << "log-probs are of the biased distribution";
}

TEST(JobSamplingControls, MinTokensHoldsBackTheEndOfGeneration) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const json eos_bias = {{std::to_string(kEos), 100}};
  auto rows = run_rows(model, "min",
                       {{{"max_tokens", 10}},
                        {{"max_tokens", 10}, {"logit_bias", eos_bias}},
                        {{"max_tokens", 10}, {"logit_bias", eos_bias}, {"min_tokens", 5}},
                        {{"max_tokens", 6}, {"logit_bias", eos_bias}, {"min_tokens", 3}, {"ignore_eos", true}},
                        {{"max_tokens", 10}, {"logit_bias", {{"100", 100}}}, {"stop_token_ids", {100}}, {"min_tokens", 4}}});
  const std::vector<int> greedy = tokens(rows["r0"]);
  // Forced EOS ends the row at once.
  EXPECT_EQ(tokens(rows["r1"]), std::vector<int>{kEos});
  EXPECT_EQ(rows["r1"]["finish_reason"], "stop");
  // min_tokens 5: EOS is masked for the first five tokens (the greedy ones), then the bias wins.
  std::vector<int> held(greedy.begin(), greedy.begin() + 5);
  held.push_back(kEos);
  EXPECT_EQ(tokens(rows["r2"]), held);
  EXPECT_EQ(rows["r2"]["finish_reason"], "stop");
  // ignore_eos: EOS is no stop, so min_tokens does not mask it; the row runs to max_tokens.
  EXPECT_EQ(tokens(rows["r3"]), std::vector<int>(6, kEos));
  EXPECT_EQ(rows["r3"]["finish_reason"], "length");
  // A stop token id is masked the same way.
  std::vector<int> held_stop(greedy.begin(), greedy.begin() + 4);
  held_stop.push_back(100);
  EXPECT_EQ(tokens(rows["r4"]), held_stop);
  EXPECT_EQ(rows["r4"]["finish_reason"], "stop");
}

TEST(JobSamplingControls, IncludeStopStrKeepsTheStopStringInTheText) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  auto rows = run_rows(model, "include",
                       {{{"max_tokens", 20}},
                        {{"max_tokens", 20}, {"stop", {" girl"}}},
                        {{"max_tokens", 20}, {"stop", {" girl"}}, {"include_stop_str_in_output", true}}});
  const std::string full = rows["r0"]["text"];
  const size_t at = full.find(" girl");
  ASSERT_NE(at, std::string::npos) << full;
  EXPECT_EQ(rows["r1"]["text"], full.substr(0, at));
  EXPECT_EQ(rows["r2"]["text"], full.substr(0, at + std::strlen(" girl")));
  EXPECT_EQ(rows["r1"]["finish_reason"], "stop");
  EXPECT_EQ(rows["r2"]["finish_reason"], "stop");
  EXPECT_EQ(tokens(rows["r1"]), tokens(rows["r2"]));
}

TEST(JobSamplingControls, OutputPenaltiesStartAfterTheFirstTokenRepetitionCountsThePrompt) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  auto rows = run_rows(model, "penalties",
                       {{{"max_tokens", 64}},
                        {{"max_tokens", 64}, {"presence_penalty", 2}, {"frequency_penalty", 2}},
                        {{"max_tokens", 64}, {"repetition_penalty", 2}}});
  const auto lp0 = logprobs(rows["r0"]), lp1 = logprobs(rows["r1"]), lp2 = logprobs(rows["r2"]);
  // No output token yet at step 0: presence and frequency change nothing there, bit for bit.
  EXPECT_EQ(tokens(rows["r1"])[0], tokens(rows["r0"])[0]);
  EXPECT_EQ(lp1[0], lp0[0]);

  // The prompt's tokens are penalized by repetition_penalty from the first step on.
  EXPECT_NE(lp2[0], lp0[0]);
  // The output penalties make the row repeat its tokens less often than the plain greedy one.
  auto repeats = [](const std::vector<int>& t) {
    std::map<int, int> c;
    int n = 0;
    for (int id : t) n += c[id]++ > 0;
    return n;
  };
  ASSERT_GT(repeats(tokens(rows["r0"])), 0) << "64 greedy tokens of a story repeat some token";
  EXPECT_LT(repeats(tokens(rows["r1"])), repeats(tokens(rows["r0"])));
}

TEST(JobSamplingControls, IdsOutsideTheVocabularyFailTheirRowByName) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  auto rows = run_rows(model, "vocab",
                       {{{"max_tokens", 4}, {"stop_token_ids", {512}}},
                        {{"max_tokens", 4}, {"logit_bias", {{"600", 1}}}},
                        {{"max_tokens", 4}}});
  EXPECT_EQ(rows["r0"]["status"], "error");
  EXPECT_NE(rows["r0"]["error"].get<std::string>().find(
                ":1: stop_token_ids: expected token ids in 0..511 (the model's vocabulary), found 512"),
            std::string::npos)
      << rows["r0"].dump();
  EXPECT_EQ(rows["r1"]["status"], "error");
  EXPECT_NE(rows["r1"]["error"].get<std::string>().find(":2: logit_bias: expected token ids in 0..511"), std::string::npos)
      << rows["r1"].dump();
  EXPECT_EQ(tokens(rows["r2"]).size(), 4u) << "the other rows run";
}

}  // namespace
