// prompt_logprobs (vLLM's) in whole jobs on stories260K: each prompt token's log-prob is the figure
// --mode score gives that token after the same text, the k alternatives come sorted and hold the token when
// it ranks within k, JSONL and HDF5 agree, results are byte-identical with prefix sharing on and off, at 1
// and 3 ranks, 2 replicas and --n-prefill each (n > 1: on the prompt's first sample only), the OpenAI formats
// carry vLLM's shape, and bad values fail their line by name.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/job_runner.h"
#include "common/openai_batch_schema.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"

namespace {

using glacier::testing::read_jsonl;
using nlohmann::json;

constexpr int kJobTimeLimitS = 60;  // a second or two of work; the limit only stops a hung job
const std::string kText = "Once upon a time there was a little girl named Lily. She liked to play outside";

struct Job {
  std::string dir;
  std::string jsonl_text;  // the JSONL file's bytes
  std::vector<json> rows;
  std::string log;
};

Job run(const std::string& model, const std::string& name, int np, const std::vector<json>& lines,
        const std::string& extra = "") {
  auto job = glacier::testing::run_lines_job(model, "prompt-logprobs-" + name, np, lines, extra, kJobTimeLimitS);
  return {job.dir, std::move(job.jsonl), read_jsonl(job.dir + "/r.jsonl"), std::move(job.log)};
}

// The alternatives of one prompt token: k of them, best first, ties by the lower id; when the token itself
// ranks within k (its log-prob at least the k-th's) it is among them with its own log-prob.
void check_alternatives(const json& entry, size_t k, const std::string& where) {
  const json& top = entry["top_logprobs"];
  ASSERT_EQ(top.size(), k) << where;
  const float own = entry["logprob"].get<float>();
  bool found = false;
  for (size_t j = 0; j < k; ++j) {
    const float lp = top[j]["logprob"].get<float>();
    EXPECT_LE(lp, 0.0f) << where;
    if (j > 0) {
      const float prev = top[j - 1]["logprob"].get<float>();
      EXPECT_TRUE(prev > lp || (prev == lp && top[j - 1]["id"].get<int>() < top[j]["id"].get<int>()))
          << where << ": alternatives out of order at " << j;
    }
    if (top[j]["id"] == entry["id"]) {
      found = true;
      EXPECT_EQ(lp, own) << where << ": the token's alternative has another log-prob";
    }
  }
  if (k > 0) {
    EXPECT_GE(top[0]["logprob"].get<float>(), own) << where << ": the most likely token is less likely than the prompt's";
    if (own >= top[k - 1]["logprob"].get<float>()) {
      EXPECT_TRUE(found) << where << ": the token ranks within k but is missing";
    }
  }
}

TEST(JobPromptLogprobs, EachPromptTokenLogprobIsItsScore) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  constexpr size_t kTop = 5;
  // The same text scored as a continuation of the empty context (BOS only): position t's score is the
  // log-prob of prompt token t + 1 given the tokens before it.
  const Job score = run(model, "score", 1, {{{"id", "s"}, {"context", ""}, {"continuation", kText}}}, "--mode score");
  ASSERT_EQ(score.rows.size(), 1u);
  ASSERT_EQ(score.rows[0]["status"], "ok") << score.rows[0].dump();
  std::vector<int> score_tokens = score.rows[0]["prompt_tokens"].get<std::vector<int>>();
  for (const json& t : score.rows[0]["tokens"]) score_tokens.push_back(t.get<int>());
  std::string first;
  for (int np : {1, 3}) {
    SCOPED_TRACE("np " + std::to_string(np));
    const Job gen = run(model, "gen-np" + std::to_string(np), np,
                        {{{"id", "g"}, {"prompt", kText}, {"max_tokens", 2}, {"prompt_logprobs", kTop}}});
    ASSERT_EQ(gen.rows.size(), 1u);
    const json& row = gen.rows[0];
    ASSERT_EQ(row["status"], "ok") << row.dump();
    const auto prompt = row["prompt_tokens"].get<std::vector<int>>();
    ASSERT_EQ(prompt, score_tokens) << "the generate prompt and the scored text tokenize alike";
    const json& plp = row["prompt_logprobs"];
    ASSERT_EQ(plp.size(), prompt.size());
    EXPECT_TRUE(plp[0].is_null()) << "the first prompt token follows nothing";
    const json& scored = score.rows[0]["logprobs"];
    ASSERT_EQ(scored.size() + 1, prompt.size());
    for (size_t t = 1; t < prompt.size(); ++t) {
      const std::string where = "prompt token " + std::to_string(t);
      EXPECT_EQ(plp[t]["id"].get<int>(), prompt[t]) << where;
      EXPECT_EQ(plp[t]["logprob"].get<float>(), scored[t - 1].get<float>()) << where << ": not the token's score";
      check_alternatives(plp[t], kTop, where);
    }
    // HDF5: the same figures, NaN and -1 in the first token's place, k alternatives per token.
    const auto h5 = glacier::io::read_finished(gen.dir + "/r.h5");
    ASSERT_EQ(h5.rows.size(), 1u);
    const auto& r = h5.rows[0];
    EXPECT_EQ(r.prompt_logprobs, static_cast<int32_t>(kTop));
    ASSERT_EQ(r.prompt_logprob_values.size(), prompt.size());
    EXPECT_TRUE(std::isnan(r.prompt_logprob_values[0]));
    ASSERT_EQ(r.prompt_top_ids.size(), prompt.size() * kTop);
    for (size_t j = 0; j < kTop; ++j) EXPECT_EQ(r.prompt_top_ids[j], -1);
    for (size_t t = 1; t < prompt.size(); ++t) {
      EXPECT_EQ(r.prompt_logprob_values[t], plp[t]["logprob"].get<float>()) << t;
      for (size_t j = 0; j < kTop; ++j) {
        EXPECT_EQ(r.prompt_top_ids[t * kTop + j], plp[t]["top_logprobs"][j]["id"].get<int>()) << t;
        EXPECT_EQ(r.prompt_top_values[t * kTop + j], plp[t]["top_logprobs"][j]["logprob"].get<float>()) << t;
      }
    }
    if (first.empty()) first = gen.jsonl_text;
    EXPECT_EQ(gen.jsonl_text, first) << "1 and 3 ranks differ";
  }
}

// Prompts on one long preamble, with and without prompt_logprobs: a prompt that asks computes its whole
// prompt (a copied KV row has no logits), the others still share; every output byte is the same either way.
TEST(JobPromptLogprobs, ByteIdenticalWithPrefixSharingOnAndOffAndOnTheFirstSampleOnly) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::vector<json> lines = {
      {{"id", "a"}, {"prompt", kText + " with her dog"}, {"max_tokens", 4}},
      {{"id", "b"}, {"prompt", kText + " with her cat"}, {"max_tokens", 4}, {"prompt_logprobs", 3}},
      {{"id", "c"}, {"prompt", kText + " in the sun"}, {"max_tokens", 4}, {"prompt_logprobs", 0}, {"n", 3},
       {"temperature", 1.0}, {"seed", 3}},
      {{"id", "d"}, {"prompt", kText + " in the rain"}, {"max_tokens", 4}},
      {{"id", "e"}, {"prompt", kText + " in the rain today"}, {"max_tokens", 4}, {"prompt_logprobs", 2}},
  };
  const Job off = run(model, "share-off", 1, lines, "--prefix-sharing off");
  const Job on = run(model, "share-on", 1, lines, "--prefix-sharing on");
  const Job on3 = run(model, "share-on-np3", 3, lines, "--prefix-sharing on");
  const Job each = run(model, "n-prefill-each", 1, lines, "--prefix-sharing on --n-prefill each");
  const Job replicas = run(model, "replicas", 2, lines, "--prefix-sharing on --replicas 2");
  EXPECT_GT(glacier::testing::prefix_cache_tokens(on.log), 0)
      << "the prompts without prompt_logprobs shared their preamble: " << on.log;
  EXPECT_EQ(on.jsonl_text, off.jsonl_text);
  EXPECT_EQ(on3.jsonl_text, off.jsonl_text);
  EXPECT_EQ(each.jsonl_text, off.jsonl_text);
  EXPECT_EQ(replicas.jsonl_text, off.jsonl_text) << "rows that travel between replicas keep their prompt log-probs";
  // Rows: a, b, c (3 samples), d, e; the prompt's log-probs on c's sample 0 only.
  ASSERT_EQ(off.rows.size(), 7u);
  const std::vector<bool> carries = {false, true, true, false, false, false, true};
  for (size_t i = 0; i < off.rows.size(); ++i) {
    EXPECT_EQ(off.rows[i]["status"], "ok") << off.rows[i].dump();
    EXPECT_EQ(off.rows[i].contains("prompt_logprobs"), carries[i]) << off.rows[i].dump();
  }
  for (size_t t = 1; t < off.rows[2]["prompt_tokens"].size(); ++t)
    EXPECT_TRUE(off.rows[2]["prompt_logprobs"][t]["top_logprobs"].empty()) << "k = 0 lists no alternatives";
  // The HDF5 rows alike: -1 on the rows that carry none, k on the others.
  for (const Job* j : {&off, &on}) {
    const auto h5 = glacier::io::read_finished(j->dir + "/r.h5");
    for (const auto& r : h5.rows) {
      const int32_t expected = r.id == "b" ? 3 : r.id == "e" ? 2 : r.id == "c" && r.sample == 0 ? 0 : -1;
      EXPECT_EQ(r.prompt_logprobs, expected) << r.id << " sample " << r.sample;
    }
  }
}

// The OpenAI formats: vLLM's {"<id>": {"logprob", "rank", "decoded_token"}} per prompt token, on every
// choice of a completions prompt (each element its own) and once on a chat response; the prompt token's
// log-prob is the plain line's.
TEST(JobPromptLogprobs, OpenAiLinesCarryVllmsShape) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog ran"};
  std::vector<json> lines;
  for (size_t p = 0; p < prompts.size(); ++p)
    lines.push_back({{"id", "plain" + std::to_string(p)}, {"prompt", prompts[p]}, {"max_tokens", 2}, {"prompt_logprobs", 2}});
  lines.push_back({{"custom_id", "cmp"},
                   {"method", "POST"},
                   {"url", "/v1/completions"},
                   {"body", {{"prompt", prompts}, {"max_tokens", 2}, {"n", 2}, {"prompt_logprobs", 2}}}});
  lines.push_back({{"custom_id", "chat"},
                   {"method", "POST"},
                   {"url", "/v1/chat/completions"},
                   {"body", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}, {"prompt_logprobs", 1}}}});
  // The plain lines, the reference, in a job of their own.
  const Job plain = run(model, "openai-plain", 1, {lines[0], lines[1]});
  const Job batch = run(model, "openai-batch", 1, {lines[2], lines[3]}, "--chat-template chatml");
  ASSERT_EQ(plain.rows.size(), 2u);
  ASSERT_EQ(batch.rows.size(), 2u);
  using glacier::testing::OpenAiLineExpectation;
  OpenAiLineExpectation completion{false, true, false, 0, 4};
  completion.prompt_logprobs = 2;
  OpenAiLineExpectation chat{true, true, false, 0, 1};
  chat.prompt_logprobs = 1;
  std::string problems;
  for (const auto& p : glacier::testing::openai_line_problems(batch.rows[0], completion)) problems += p + "\n";
  for (const auto& p : glacier::testing::openai_line_problems(batch.rows[1], chat)) problems += p + "\n";
  EXPECT_EQ(problems, "") << batch.jsonl_text;
  const json& choices = batch.rows[0]["response"]["body"]["choices"];
  for (size_t i = 0; i < choices.size(); ++i) {
    const json& ours = plain.rows[i / 2];
    const json& theirs = choices[i]["prompt_logprobs"];
    ASSERT_EQ(theirs.size(), ours["prompt_tokens"].size()) << "choice " << i;
    for (size_t t = 1; t < theirs.size(); ++t) {
      const std::string id = std::to_string(ours["prompt_tokens"][t].get<int>());
      ASSERT_TRUE(theirs[t].contains(id)) << "choice " << i << " token " << t << ": " << theirs[t].dump();
      EXPECT_EQ(theirs[t][id]["logprob"].get<float>(), ours["prompt_logprobs"][t]["logprob"].get<float>());
      for (size_t j = 0; j < 2; ++j) {  // the alternatives, ranked 1 and 2
        const json& alt = ours["prompt_logprobs"][t]["top_logprobs"][j];
        const json& entry = theirs[t][std::to_string(alt["id"].get<int>())];
        EXPECT_EQ(entry["rank"], j + 1);
        EXPECT_EQ(entry["logprob"].get<float>(), alt["logprob"].get<float>());
      }
    }
  }
}

TEST(JobPromptLogprobs, BadValuesFailTheirLineByName) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"prompt", "x"}, {"prompt_logprobs", 21}}, "\"prompt_logprobs\": expected an integer in 0..20"},
      {{{"prompt", "x"}, {"prompt_logprobs", -1}}, "\"prompt_logprobs\": expected an integer in 0..20"},
      {{{"prompt", "x"}, {"prompt_logprobs", "3"}}, "\"prompt_logprobs\": expected an integer in 0..20"},
      {{{"prompt", "x"}, {"prompt_logprobs", 2.5}}, "\"prompt_logprobs\": expected an integer in 0..20"},
      {{{"prompt", "x"}, {"prompt_logprobs", 2}, {"max_tokens", 0}}, "prompt_logprobs 2: expected max_tokens >= 1"},
      {{{"custom_id", "c"}, {"url", "/v1/completions"}, {"body", {{"prompt", "x"}, {"prompt_logprobs", 21}}}},
       "\"body.prompt_logprobs\": expected an integer in 0..20"},
  };
  std::vector<json> lines;
  for (const auto& c : cases) lines.push_back(c.first);
  lines.push_back({{"prompt", "Once"}, {"max_tokens", 1}, {"prompt_logprobs", 1}});  // a job with no good line exits 3
  const Job job = run(model, "bad", 1, lines);
  ASSERT_EQ(job.rows.size(), lines.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const json& row = job.rows[i];
    const std::string message = row.contains("response") ? row["error"]["message"].get<std::string>() : row["error"].get<std::string>();
    EXPECT_NE(message.find("p.jsonl:" + std::to_string(i + 1) + ": " + cases[i].second), std::string::npos)
        << "line " << i + 1 << ": " << message;
  }
  EXPECT_EQ(job.rows.back()["status"], "ok");
  // A score record refuses it: --mode score returns the continuation's log-probs itself.
  const Job score = run(model, "bad-score", 1,
                        {{{"context", "Once"}, {"continuation", " upon"}, {"prompt_logprobs", 1}},
                         {{"context", "Once"}, {"continuation", " upon"}}},
                        "--mode score");
  ASSERT_EQ(score.rows.size(), 2u);
  EXPECT_NE(score.rows[0]["error"].get<std::string>().find(
                "p.jsonl:1: prompt_logprobs 1: expected no such key on a context/continuation record"),
            std::string::npos)
      << score.rows[0].dump();
}

}  // namespace
