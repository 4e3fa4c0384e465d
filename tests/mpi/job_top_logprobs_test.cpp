// top_logprobs in whole jobs on stories260K, at 1 and 3 ranks: per generated token the k alternatives
// come back sorted, a greedy step's first alternative is its token with the row's log-prob, the JSONL
// and HDF5 results are identical across rank counts, every OpenAI batch output line (completions and
// chat, with and without log-probs, a bad line) has the documented fields, and --resume reruns a row
// whose top_logprobs changed.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/job_runner.h"
#include "common/openai_batch_schema.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"

namespace {

using glacier::testing::read_jsonl;
using glacier::testing::run_glacier;
using nlohmann::json;

constexpr int kJobTimeLimitS = 60;  // a second of work; the limit only stops a hung job

const char* const kCompletion = R"({"custom_id": "%s", "method": "POST", "url": "/v1/completions", "body": )";
const char* const kChat = R"({"custom_id": "%s", "method": "POST", "url": "/v1/chat/completions", "body": )";

std::string openai(const char* head, const std::string& id, const json& body) {
  std::string line = head;
  line.replace(line.find("%s"), 2, id);
  return line + body.dump() + "}";
}

// The prompt file: glacier lines (greedy with k = 5 and 20, sampled with k = 3, none), then OpenAI lines.
std::vector<std::string> prompt_lines() {
  const json chat_messages = json::array({{{"role", "user"}, {"content", "Tell me a story"}}});
  return {
      R"({"id": "g5", "prompt": "Once upon a time", "max_tokens": 12, "top_logprobs": 5})",
      R"({"id": "g20", "prompt": "The little dog", "max_tokens": 8, "top_logprobs": 20})",
      R"({"id": "s3", "prompt": "Lily and Tom", "max_tokens": 10, "temperature": 0.9, "seed": 7, "top_logprobs": 3})",
      R"({"id": "none", "prompt": "One day", "max_tokens": 6})",
      openai(kCompletion, "cmp-lp", {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"logprobs", 3}}),
      openai(kCompletion, "cmp-lp0", {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"logprobs", 0}}),
      openai(kCompletion, "cmp", {{"prompt", "Once upon a time"}, {"max_tokens", 6}}),
      openai(kChat, "chat-lp", {{"messages", chat_messages}, {"max_tokens", 5}, {"logprobs", true}, {"top_logprobs", 2}}),
      openai(kChat, "chat", {{"messages", chat_messages}, {"max_tokens", 5}}),
      openai(kCompletion, "bad", {{"prompt", "x"}, {"logprobs", 25}}),
      openai(kCompletion, "array", {{"prompt", {"a", 1}}, {"max_tokens", 2}}),
  };
}

struct JobResult {
  std::vector<json> rows;
  glacier::io::FinishedResults h5;
};

JobResult run_job(const std::string& model, const std::string& dir, int np, const std::string& prompts, const std::string& extra = "") {
  const auto run = run_glacier(np, "--model " + model + " --prompts " + prompts + " --jsonl " + dir + "/r" + std::to_string(np) +
                                       ".jsonl --out " + dir + "/r" + std::to_string(np) + ".h5 --chat-template chatml" + extra,
                               kJobTimeLimitS);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  JobResult r;
  r.rows = read_jsonl(dir + "/r" + std::to_string(np) + ".jsonl");
  r.h5 = glacier::io::read_finished(dir + "/r" + std::to_string(np) + ".h5");
  return r;
}

// The alternatives of a glacier row: sorted by log-prob, ties by id; greedy rows start with their token.
void check_glacier_row(const json& row, int k, bool greedy) {
  SCOPED_TRACE(row["id"].get<std::string>());
  ASSERT_EQ(row["status"], "ok") << row.dump();
  const auto tokens = row["tokens"].get<std::vector<int>>();
  const auto logprobs = row["logprobs"].get<std::vector<float>>();
  ASSERT_FALSE(tokens.empty());
  ASSERT_TRUE(row["top_logprobs"].is_array());
  ASSERT_EQ(row["top_logprobs"].size(), tokens.size());
  for (size_t t = 0; t < tokens.size(); ++t) {
    const json& alternatives = row["top_logprobs"][t];
    ASSERT_EQ(alternatives.size(), static_cast<size_t>(k)) << "step " << t;
    bool chosen_listed = false;
    for (size_t j = 0; j < alternatives.size(); ++j) {
      const float lp = alternatives[j]["logprob"].get<float>();
      EXPECT_TRUE(alternatives[j]["token"].is_string());
      if (alternatives[j]["id"] == tokens[t]) {
        chosen_listed = true;
        EXPECT_EQ(lp, logprobs[t]) << "the chosen token's log-prob, listed among the alternatives, step " << t;
      }
      if (j == 0) continue;
      const float before = alternatives[j - 1]["logprob"].get<float>();
      EXPECT_LE(lp, before) << "sorted, step " << t << " rank " << j;
      if (lp == before) {
        EXPECT_LT(alternatives[j - 1]["id"].get<int>(), alternatives[j]["id"].get<int>()) << "ties: lower id first";
      }
    }
    if (greedy) {
      EXPECT_EQ(alternatives[0]["id"], tokens[t]) << "step " << t;
      EXPECT_EQ(alternatives[0]["logprob"].get<float>(), logprobs[t]) << "step " << t;
    } else if (!chosen_listed) {
      EXPECT_LE(logprobs[t], alternatives[k - 1]["logprob"].get<float>()) << "a sampled token outside the top k is no likelier";
    }
  }
}

// A row of the JSONL without what legitimately differs between two runs (OpenAI's "created").
json comparable(json row) {
  if (row.contains("response") && row["response"].contains("body") && row["response"]["body"].contains("created"))
    row["response"]["body"].erase("created");
  return row;
}

TEST(JobTopLogprobs, AlternativesAreSortedConsistentAndIdenticalAcrossRankCounts) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("top-logprobs");
  const std::string prompts = dir + "/p.jsonl";
  {
    std::ofstream out(prompts);
    for (const auto& line : prompt_lines()) out << line << "\n";
  }
  std::map<int, JobResult> runs;
  for (int np : {1, 3}) {
    SCOPED_TRACE("np " + std::to_string(np));
    runs[np] = run_job(model, dir, np, prompts);
    const auto& rows = runs[np].rows;
    ASSERT_EQ(rows.size(), prompt_lines().size());
    check_glacier_row(rows[0], 5, true);
    check_glacier_row(rows[1], 20, true);
    check_glacier_row(rows[2], 3, false);
    EXPECT_FALSE(rows[3].contains("top_logprobs")) << "not asked, not written";

    using glacier::testing::OpenAiLineExpectation;
    const std::vector<std::pair<size_t, OpenAiLineExpectation>> expected = {
        {4, {false, true, true, 3, 1}}, {5, {false, true, true, 0, 1}}, {6, {false, true, false, 0, 1}},
        {7, {true, true, true, 2, 1}},  {8, {true, true, false, 0, 1}}, {9, {false, false}}, {10, {false, false}}};
    for (const auto& [i, e] : expected) {
      std::string problems;
      for (const auto& p : glacier::testing::openai_line_problems(rows[i], e)) problems += p + "\n";
      EXPECT_EQ(problems, "") << "line " << i + 1 << ": " << rows[i].dump();
    }
    // The completion's alternatives are the glacier row's for the same greedy prompt: its first token's
    // best alternative is the chosen one, with the token's log-prob.
    const json& lp = rows[4]["response"]["body"]["choices"][0]["logprobs"];
    const std::string first = lp["tokens"][0].get<std::string>();
    ASSERT_TRUE(lp["top_logprobs"][0].contains(first)) << lp.dump();
    EXPECT_EQ(lp["top_logprobs"][0][first].get<float>(), lp["token_logprobs"][0].get<float>());
    for (size_t t = 0; t < lp["token_logprobs"].size() && t < rows[0]["logprobs"].size(); ++t)
      EXPECT_EQ(lp["token_logprobs"][t].get<float>(), rows[0]["logprobs"][t].get<float>()) << "same prompt, greedy, step " << t;
    EXPECT_NE(rows[9]["error"]["message"].get<std::string>().find("\"body.logprobs\": expected an integer in 0..20"),
              std::string::npos);
    EXPECT_NE(rows[10]["error"]["message"].get<std::string>().find("\"body.prompt[1]\": expected a string, as the array's first"),
              std::string::npos)
        << "a prompt array of mixed kinds is refused by name: " << rows[10].dump();
  }
  for (size_t i = 0; i < runs[1].rows.size(); ++i)
    EXPECT_EQ(comparable(runs[1].rows[i]), comparable(runs[3].rows[i])) << "line " << i + 1 << " differs between 1 and 3 ranks";

  // The HDF5 rows hold the same alternatives as the JSONL, at 1 and 3 ranks alike.
  std::map<int64_t, const glacier::io::ResultRecord*> by_index1, by_index3;
  for (const auto& r : runs[1].h5.rows) by_index1[r.index] = &r;
  for (const auto& r : runs[3].h5.rows) by_index3[r.index] = &r;
  ASSERT_EQ(by_index1.size(), prompt_lines().size());
  ASSERT_EQ(by_index3.size(), prompt_lines().size());
  for (const auto& [index, r] : by_index1) {
    SCOPED_TRACE("row " + std::to_string(index));
    EXPECT_EQ(r->top_logprobs, by_index3[index]->top_logprobs);
    EXPECT_EQ(r->top_ids, by_index3[index]->top_ids);
    EXPECT_EQ(r->top_values, by_index3[index]->top_values);
  }
  const glacier::io::ResultRecord& g5 = *by_index1[0];
  ASSERT_EQ(g5.top_logprobs, 5);
  const json& row = runs[1].rows[0];
  for (size_t t = 0; t < g5.tokens.size(); ++t)
    for (size_t j = 0; j < 5; ++j) {
      EXPECT_EQ(g5.top_ids[t * 5 + j], row["top_logprobs"][t][j]["id"].get<int>());
      EXPECT_EQ(g5.top_values[t * 5 + j], row["top_logprobs"][t][j]["logprob"].get<float>());
    }
  EXPECT_EQ(by_index1[3]->top_logprobs, 0);
  EXPECT_TRUE(by_index1[3]->top_ids.empty());
}

// top_logprobs is part of a row's request: a resumed run keeps the rows whose lines are unchanged and
// runs again the one whose top_logprobs changed; --top-logprobs is a result setting, so changing it is refused.
TEST(JobTopLogprobs, ResumeRerunsARowWhoseTopLogprobsChanged) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("top-logprobs-resume");
  const std::string prompts = dir + "/p.jsonl";
  auto write_prompts = [&](int k) {
    std::ofstream out(prompts);
    out << R"({"id": "a", "prompt": "Once upon a time", "max_tokens": 4, "top_logprobs": 2})" << "\n"
        << R"({"id": "b", "prompt": "The little dog", "max_tokens": 4, "top_logprobs": )" << k << "}\n";
  };
  write_prompts(2);
  const std::string common = "--model " + model + " --prompts " + prompts + " --out " + dir + "/r.h5 --jsonl " + dir + "/r.jsonl";
  ASSERT_EQ(run_glacier(1, common, kJobTimeLimitS).exit_code, 0);
  write_prompts(4);
  const auto resumed = run_glacier(1, common + " --resume", kJobTimeLimitS);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("1 whose prompt line or sampling changed"), std::string::npos) << resumed.output;
  const auto rows = read_jsonl(dir + "/r.jsonl");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(rows[1]["top_logprobs"][0].size(), 4u) << "the changed row ran again with its new request";

  const auto refused = run_glacier(1, common + " --resume --top-logprobs 3", kJobTimeLimitS);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("top_logprobs: 0 in the file, 3 now"), std::string::npos) << refused.output;
}

}  // namespace
