// "messages" prompts end to end: rendered with the chat template (from --chat-template, or an error
// naming the option, before loading, when the model has none), control tokens parsed, one bad message failing only
// its own prompt; OpenAI chat batch lines get chat completion output lines.
#include <gtest/gtest.h>

#include <fstream>

#include "app/job.h"
#include "common/job_runner.h"
#include "common/test_env.h"

namespace {

TEST(JobChat, MessagesRenderWithTheChosenTemplate) {
  GLACIER_REQUIRE_SHARED(model, "models/synthetic/synth-qwen2-f32.gguf");
  const std::string dir = glacier::testing::scratch_dir("chat");
  {
    std::ofstream p(dir + "/chat.jsonl");
    p << R"({"id": "c1", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}], "max_tokens": 6})"
      << "\n"
      << R"({"custom_id": "c2", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4}})"
      << "\n"
      << R"({"id": "c3", "messages": [{"role": "wizard", "content": "x"}]})" << "\n";
  }
  // This synthetic model carries no tokenizer.chat_template: without --chat-template the job is refused
  // before loading, naming the first chat line and the option to pass; nothing is written.
  auto plain = glacier::testing::run_glacier(2, "--model " + model + " --prompts " + dir + "/chat.jsonl --jsonl " + dir + "/a.jsonl");
  ASSERT_EQ(plain.exit_code, glacier::app::kExitInputError) << plain.output;
  EXPECT_NE(plain.output.find(dir + "/chat.jsonl:1: \"messages\" needs a chat template"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find("--chat-template"), std::string::npos) << plain.output;
  EXPECT_FALSE(std::ifstream(dir + "/a.jsonl").good()) << "no output is written by a refused job";

  auto run = glacier::testing::run_glacier(2, "--model " + model + " --prompts " + dir + "/chat.jsonl --jsonl " + dir +
                                                  "/b.jsonl --chat-template chatml");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto rows = glacier::testing::read_jsonl(dir + "/b.jsonl");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["status"], "ok");
  const auto prompt = rows[0]["prompt_tokens"].get<std::vector<int>>();
  ASSERT_GE(prompt.size(), 3u);
  EXPECT_EQ(prompt.front(), 766) << "<|im_start|> parsed as its control token";
  EXPECT_EQ(rows[0]["tokens"].size(), 6u);
  EXPECT_EQ(rows[1]["custom_id"], "c2");
  EXPECT_TRUE(rows[1]["error"].is_null()) << rows[1].dump();
  EXPECT_EQ(rows[1]["response"]["body"]["object"], "chat.completion");
  EXPECT_EQ(rows[2]["status"], "error");
  EXPECT_NE(rows[2]["error"].get<std::string>().find("wizard"), std::string::npos);
}

TEST(JobChat, UnknownTemplateNameIsRefusedBeforeLoading) {
  auto run = glacier::testing::run_glacier(1, "--model /nonexistent.gguf --prompts x.jsonl --jsonl y.jsonl --chat-template vicuna", 30);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("vicuna"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("chatml"), std::string::npos) << run.output;
}

}  // namespace
