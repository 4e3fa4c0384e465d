// OpenAI /v1/completions bodies with a prompt array, in whole jobs on stories260K at 1 and 3 ranks: each
// element's n choices (index element * n + sample) are the choices of that prompt sent alone, usage sums
// the elements, a one-element array answers exactly as the string, and bad arrays fail their line by name.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/job_runner.h"
#include "common/openai_batch_schema.h"
#include "common/test_env.h"

namespace {

using glacier::testing::read_jsonl;
using glacier::testing::run_glacier;
using nlohmann::json;

constexpr int kJobTimeLimitS = 60;  // a second of work; the limit only stops a hung job
constexpr int kSamples = 2;
const std::vector<std::string> kPrompts = {"Once upon a time", "The little dog", "Lily and Tom went to"};

// Sampled by default (temperature 1), so a choice that came from another element's or sample's stream shows.
json request(const std::string& id, const json& prompt, int n = kSamples, double temperature = 1.0) {
  return {{"custom_id", id},
          {"method", "POST"},
          {"url", "/v1/completions"},
          {"body", {{"prompt", prompt}, {"max_tokens", 6}, {"n", n}, {"temperature", temperature}, {"seed", 11}}}};
}

std::vector<json> run_lines(const std::string& model, const std::string& name, int np, const std::vector<json>& lines) {
  const std::string dir = glacier::testing::scratch_dir("prompt-array-" + name);
  {
    std::ofstream out(dir + "/p.jsonl");
    for (const json& l : lines) out << l.dump() << "\n";
  }
  const auto run = run_glacier(np, "--model " + model + " --prompts " + dir +
                                       "/p.jsonl --jsonl " + dir + "/r.jsonl",
                               kJobTimeLimitS);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return read_jsonl(dir + "/r.jsonl");
}

// The choices without their index, for comparing a choice with the one a single prompt gave.
json without_index(json choice) {
  choice.erase("index");
  return choice;
}

TEST(JobPromptArray, EachElementAnswersAsThePromptSentAlone) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  // Each prompt alone, under the same custom_id (it keys the random streams), one job each.
  std::vector<json> alone;
  for (size_t p = 0; p < kPrompts.size(); ++p) {
    const auto rows = run_lines(model, "alone" + std::to_string(p), 1, {request("req", kPrompts[p])});
    ASSERT_EQ(rows.size(), 1u);
    ASSERT_TRUE(rows[0]["error"].is_null()) << rows[0].dump();
    alone.push_back(rows[0]["response"]["body"]);
  }
  for (int np : {1, 3}) {
    SCOPED_TRACE("np " + std::to_string(np));
    const auto rows = run_lines(model, "array-np" + std::to_string(np), np, {request("req", kPrompts)});
    ASSERT_EQ(rows.size(), 1u) << "one output line for the request";
    std::string problems;
    for (const auto& p : glacier::testing::openai_line_problems(rows[0], {false, true, false, 0, kPrompts.size() * kSamples}))
      problems += p + "\n";
    EXPECT_EQ(problems, "") << rows[0].dump();
    const json& body = rows[0]["response"]["body"];
    ASSERT_EQ(body["choices"].size(), kPrompts.size() * kSamples) << body.dump();
    int64_t prompt_tokens = 0, completion_tokens = 0;
    for (size_t p = 0; p < kPrompts.size(); ++p) {
      for (size_t j = 0; j < kSamples; ++j) {
        const json& choice = body["choices"][p * kSamples + j];
        EXPECT_EQ(choice["index"], p * kSamples + j);
        EXPECT_EQ(without_index(choice), without_index(alone[p]["choices"][j])) << "prompt " << p << " sample " << j;
      }
      prompt_tokens += alone[p]["usage"]["prompt_tokens"].get<int64_t>();
      completion_tokens += alone[p]["usage"]["completion_tokens"].get<int64_t>();
    }
    EXPECT_EQ(body["usage"]["prompt_tokens"].get<int64_t>(), prompt_tokens);
    EXPECT_EQ(body["usage"]["completion_tokens"].get<int64_t>(), completion_tokens);
    EXPECT_EQ(body["usage"]["total_tokens"].get<int64_t>(), prompt_tokens + completion_tokens);
  }
}

TEST(JobPromptArray, TokenIdListsAndOneElementArrays) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const json ids_a = {1, 403, 407, 261}, ids_b = {1, 365, 130};
  // Greedy, so that requests under other custom_ids (other random streams) must give the same choices.
  const auto rows = run_lines(model, "ids", 1,
                              {request("ids", json::array({ids_a, ids_b}), 1, 0.0), request("ida", ids_a, 1, 0.0),
                               request("idb", ids_b, 1, 0.0)});
  ASSERT_EQ(rows.size(), 3u);
  for (const json& r : rows) ASSERT_TRUE(r["error"].is_null()) << r.dump();
  const json& both = rows[0]["response"]["body"];
  ASSERT_EQ(both["choices"].size(), 2u);
  for (size_t p = 0; p < 2; ++p)
    EXPECT_EQ(without_index(both["choices"][p]), without_index(rows[1 + p]["response"]["body"]["choices"][0])) << p;
  EXPECT_EQ(both["usage"]["prompt_tokens"].get<int64_t>(), static_cast<int64_t>(ids_a.size() + ids_b.size()));
  // A one-element array is the string prompt: the same body, sampled choices included (one custom_id, two jobs).
  const auto one = run_lines(model, "one", 1, {request("req", json::array({kPrompts[0]}))});
  const auto str = run_lines(model, "str", 1, {request("req", kPrompts[0])});
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(str.size(), 1u);
  json a = one[0]["response"]["body"], b = str[0]["response"]["body"];
  a.erase("created");  // the job's start second
  b.erase("created");
  EXPECT_EQ(a, b);
}

TEST(JobPromptArray, BadArraysFailTheirLineByName) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::vector<std::pair<json, std::string>> cases = {
      {request("empty", json::array()), "\"body.prompt\": expected a string, an array of token ids, or a non-empty array"},
      {request("mixed", json::array({"a", json::array({1, 2})})), "\"body.prompt[1]\": expected a string, as the array's first"},
      {request("mixed2", json::array({json::array({1, 2}), "a"})), "\"body.prompt[1]\": expected an array of token ids"},
      {request("emptyids", json::array({json::array({1, 2}), json::array()})), "\"body.prompt[1]\": expected a non-empty array of token ids"},
      {request("object", json::array({json::object()})), "\"body.prompt[0]\": expected a string or an array of token ids"},
      {request("toomany", json::array({"a", "b", "c"}), 50), "\"body.n\": expected at most 128 choices in all (3 prompts x n)"},
      {request("vocab", json::array({json::array({1, 2}), json::array({1, 99999})}), 1), "\"body.prompt[1]\": prompt_token_ids: expected ids in 0.."},
  };
  std::vector<json> lines;
  for (const auto& c : cases) lines.push_back(c.first);
  lines.push_back(request("good", json::array({"a", "b"})));  // a job whose every line fails exits non-zero
  const auto rows = run_lines(model, "bad", 1, lines);
  ASSERT_EQ(rows.size(), lines.size());
  EXPECT_TRUE(rows.back()["error"].is_null()) << rows.back().dump();
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(rows[i]["error"].is_object()) << rows[i].dump();
    const std::string message = rows[i]["error"]["message"].get<std::string>();
    EXPECT_NE(message.find(":" + std::to_string(i + 1) + ": " + cases[i].second), std::string::npos)
        << "line " << i + 1 << ": " << message;
  }
}

}  // namespace
