// Strict inputs at job level: what needs no model is refused before the model loads (a .jsonl given to
// --mode perplexity, a missing prompt file, "messages" without a chat template, --threads above the
// host, an abbreviated option), with exit code 2 and one message naming the culprit; a misspelt key in a
// prompt line fails only that line while the others run.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "app/job.h"
#include "common/job_runner.h"
#include "common/test_env.h"

namespace {

using glacier::testing::read_jsonl;
using glacier::testing::run_glacier;

// A refusal happens at start-up: mpirun (~0.4 s here) plus reading a header; loading and running the
// model take longer, and the absent "rank 0 of" load line is the proof that it did not load.
constexpr double kRefusalSeconds = 5.0;
constexpr int kJobTimeLimitS = 60;  // a few seconds of work; the limit only stops a hung job
constexpr const char* kLoadLine = "rank 0 of 2 on host";  // logged once a rank has mapped its shard

// Runs a 2-rank job that must be refused before loading; `message` must appear exactly once.
void expect_refused_before_loading(const std::string& args, const std::string& message) {
  const auto run = run_glacier(2, args, kJobTimeLimitS);
  EXPECT_EQ(run.exit_code, glacier::app::kExitInputError) << run.output;
  EXPECT_LT(run.seconds, kRefusalSeconds) << run.output;
  const size_t at = run.output.find(message);
  ASSERT_NE(at, std::string::npos) << "expected '" << message << "' in:\n" << run.output;
  EXPECT_EQ(run.output.find(message, at + 1), std::string::npos) << "printed more than once\n" << run.output;
  EXPECT_EQ(run.output.find(kLoadLine), std::string::npos) << "a shard was loaded\n" << run.output;
}

TEST(JobStrictInputs, JsonlInPerplexityModeIsRefusedBeforeLoading) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("strict-ppl");
  std::ofstream(dir + "/p.jsonl") << "{\"prompt\": \"Once upon a time there was a girl\"}\n";
  expect_refused_before_loading("--model " + model + " --prompts " + dir + "/p.jsonl --jsonl " + dir +
                                    "/r.jsonl --mode perplexity --ctx 8",
                                "prompt file " + dir + "/p.jsonl: --mode perplexity scores a plain text file, found a .jsonl file");
  EXPECT_FALSE(std::ifstream(dir + "/r.jsonl").good()) << "no output is written by a refused job";
}

TEST(JobStrictInputs, MissingPromptFileIsRefusedBeforeLoading) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("strict-missing");
  expect_refused_before_loading("--model " + model + " --prompts " + dir + "/none.jsonl --jsonl " + dir + "/r.jsonl",
                                "cannot open prompt file " + dir + "/none.jsonl");
}

TEST(JobStrictInputs, TextFileInScoreModeIsRefusedBeforeLoading) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("strict-score");
  std::ofstream(dir + "/p.txt") << "Once upon a time\nTom ran home\n";
  expect_refused_before_loading("--model " + model + " --prompts " + dir + "/p.txt --jsonl " + dir + "/r.jsonl --mode score",
                                "prompt file " + dir + "/p.txt: --mode score needs records with \"context\" and \"continuation\" or \"continuations\"");
}

TEST(JobStrictInputs, MessagesWithoutAChatTemplateAreRefusedBeforeLoading) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");  // carries no tokenizer.chat_template
  const std::string dir = glacier::testing::scratch_dir("strict-chat");
  std::ofstream(dir + "/p.jsonl") << "{\"prompt\": \"Once\"}\n{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}\n";
  expect_refused_before_loading("--model " + model + " --prompts " + dir + "/p.jsonl --jsonl " + dir + "/r.jsonl",
                                dir + "/p.jsonl:2: \"messages\" needs a chat template, but the model has no "
                                      "tokenizer.chat_template: pass --chat-template NAME");
}

TEST(JobStrictInputs, ThreadsAboveTheHostAreRefusedUnlessForced) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("strict-threads");
  std::ofstream(dir + "/p.txt") << "Once upon a time\n";
  const std::string args = "--model " + model + " --prompts " + dir + "/p.txt --jsonl " + dir + "/r.jsonl --max-tokens 2";
  // The most --threads allows (kMaxThreads) exceeds any test host; the refusal says how many it has.
  const std::string message = "option --threads: expected at most the ";
  expect_refused_before_loading(args + " --threads 4096", message);
  const auto refused = run_glacier(2, args + " --threads 4096", kJobTimeLimitS);
  const size_t at = refused.output.find(message);
  ASSERT_NE(at, std::string::npos) << refused.output;
  const int pus = std::stoi(refused.output.substr(at + message.size()));
  ASSERT_GT(pus, 0) << refused.output;
  EXPECT_NE(refused.output.find(std::to_string(pus) + " hardware threads of host "), std::string::npos) << refused.output;
  const std::string too_many = std::to_string(pus + 1);
  expect_refused_before_loading(args + " --threads " + too_many, message + std::to_string(pus) + " hardware threads");
  const auto forced = run_glacier(2, args + " --threads " + too_many + " --oversubscribe-threads", kJobTimeLimitS);
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_NE(forced.output.find(too_many + " threads"), std::string::npos) << forced.output;
  const auto at_the_limit = run_glacier(2, args + " --threads " + std::to_string(pus), kJobTimeLimitS);
  EXPECT_EQ(at_the_limit.exit_code, 0) << at_the_limit.output;
}

TEST(JobStrictInputs, AbbreviatedOptionIsRefused) {
  const auto run = run_glacier(1, "--model m.gguf --prompts p.txt --jsonl r.jsonl --te 0.5", kJobTimeLimitS);
  EXPECT_EQ(run.exit_code, glacier::app::kExitInputError) << run.output;
  EXPECT_NE(run.output.find("unrecognised option '--te'"), std::string::npos) << run.output;
}

TEST(JobStrictInputs, MisspeltKeyFailsItsLineWhileTheRestRun) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("strict-keys");
  const std::string prompts = dir + "/p.jsonl";
  std::ofstream(prompts) << R"({"id": "a", "prompt": "Once upon a time"})" << "\n"
                         << R"({"id": "b", "prompt": "Tom ran", "temprature": 0.8})" << "\n"
                         << R"({"id": "c", "prompt": "Lily saw", "typical_p": 0.5})" << "\n"
                         << R"({"id": "d", "prompt": "The sun", "temperature": 0.8, "seed": 7})" << "\n";
  const auto run = run_glacier(2, "--model " + model + " --prompts " + prompts + " --jsonl " + dir + "/r.jsonl --max-tokens 4",
                               kJobTimeLimitS);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto rows = read_jsonl(dir + "/r.jsonl");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0]["status"], "ok") << rows[0].dump();
  EXPECT_EQ(rows[3]["status"], "ok") << rows[3].dump();
  EXPECT_EQ(rows[1]["id"], "b");
  EXPECT_EQ(rows[1]["status"], "error");
  EXPECT_EQ(rows[1]["error"], prompts + ":2: \"temprature\": unknown key (did you mean \"temperature\"?): expected one of id, "
                                        "prompt, prompt_token_ids, messages, context, continuation, continuations, max_tokens, temperature, "
                                        "top_k, top_p, min_p, seed, stop, n, repetition_penalty, presence_penalty, "
                                        "frequency_penalty, min_tokens, ignore_eos, stop_token_ids, logit_bias, "
                                        "include_stop_str_in_output, top_logprobs, prompt_logprobs");
  EXPECT_EQ(rows[2]["status"], "error");
  EXPECT_NE(rows[2]["error"].get<std::string>().find(prompts + ":3: \"typical_p\": not implemented"), std::string::npos)
      << rows[2].dump();
}

}  // namespace
