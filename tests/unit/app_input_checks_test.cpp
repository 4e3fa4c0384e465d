// The pre-load input checks: the prompt file against --mode (perplexity text, score records, generate
// prompts), an empty file, the chat template "messages" records need, and --threads against the host.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "app/input_checks.h"
#include "common/input_error.h"
#include "common/test_env.h"
#include "util/error.h"

namespace {

using glacier::app::JobMode;
using glacier::app::JobOptions;
using glacier::app::PromptFileFacts;

std::string write_file(const std::string& name, const std::string& contents) {
  const std::string path = glacier::testing::scratch_dir("input_checks") + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

JobOptions options(const std::string& prompts, JobMode mode = JobMode::Generate) {
  JobOptions o;
  o.prompts = prompts;
  o.mode = mode;
  return o;
}

using glacier::testing::refusal_message;

// check_prompt_file's refusal of the prompt file under --mode `mode`, or "" when it passes.
std::string prompt_file_refusal(const std::string& prompts, JobMode mode = JobMode::Generate) {
  return refusal_message([&] { glacier::app::check_prompt_file(options(prompts, mode)); });
}

TEST(InputChecks, PerplexityReadsPlainTextOnly) {
  const std::string jsonl = write_file("ppl.jsonl", "{\"prompt\": \"Once\"}\n");
  EXPECT_EQ(prompt_file_refusal(jsonl, JobMode::Perplexity),
            "prompt file " + jsonl + ": --mode perplexity scores a plain text file, found a .jsonl file (its JSON would be "
            "scored as text)");
  const std::string empty = write_file("empty.raw", "");
  EXPECT_EQ(prompt_file_refusal(empty, JobMode::Perplexity),
            "prompt file " + empty + ": --mode perplexity needs text to score, found an empty file");
  const std::string missing = empty + ".gone";
  EXPECT_EQ(prompt_file_refusal(missing, JobMode::Perplexity),
            "prompt file " + missing + ": expected a text file, found no file");
  EXPECT_EQ(prompt_file_refusal(write_file("wiki.raw", "Some text.\n"), JobMode::Perplexity), "");
}

TEST(InputChecks, MissingOrUnreadablePromptFileIsRefused) {
  const std::string missing = glacier::testing::scratch_dir("input_checks") + "/none.jsonl";
  const std::string message = prompt_file_refusal(missing);
  EXPECT_NE(message.find("cannot open prompt file " + missing), std::string::npos) << message;
  const std::string dir = glacier::testing::scratch_dir("input_checks_dir") + "/prompts.txt";
  std::filesystem::create_directory(dir);
  const std::string message_dir = prompt_file_refusal(dir);
  EXPECT_EQ(message_dir, "prompt file " + dir + ": expected a file, found a directory");
}

TEST(InputChecks, EmptyPromptFileIsOnlyAWarning) {
  const PromptFileFacts facts = glacier::app::check_prompt_file(options(write_file("blank.jsonl", "\n  \n")));
  EXPECT_EQ(facts.records, 0);
}

TEST(InputChecks, TheFileMustHoldRecordsTheModeCanRun) {
  const std::string text = write_file("plain.txt", "Once upon a time\nTom ran\n");
  EXPECT_EQ(prompt_file_refusal(text, JobMode::Score),
            "prompt file " + text + ": --mode score needs records with \"context\" and \"continuation\" or \"continuations\", found none among "
            "its 2 prompts (a .txt file holds plain prompts)");
  const std::string scores = write_file("scores.jsonl", "{\"context\": \"The sky is\", \"continuation\": \" blue\"}\n");
  EXPECT_EQ(prompt_file_refusal(scores, JobMode::Generate),
            "prompt file " + scores + ": --mode generate needs prompts to continue, found only \"context\"/\"continuation(s)\" "
            "records among its 1 prompt: pass --mode score");
  EXPECT_EQ(prompt_file_refusal(scores, JobMode::Score), "");
  // One runnable record is enough: the others fail their own lines.
  const std::string mixed = write_file("mixed.jsonl", "{\"prompt\": \"x\"}\n{\"context\": \"a\", \"continuation\": \"b\"}\n");
  EXPECT_EQ(prompt_file_refusal(mixed, JobMode::Score), "");
  EXPECT_EQ(prompt_file_refusal(mixed, JobMode::Generate), "");
}

TEST(InputChecks, MessagesNeedAChatTemplateBeforeTheModelLoads) {
  const std::string chat = write_file("chat.jsonl", "{\"prompt\": \"x\"}\n\n{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}\n");
  const JobOptions o = options(chat);
  const PromptFileFacts facts = glacier::app::check_prompt_file(o);
  ASSERT_TRUE(facts.first_chat_line.has_value());
  EXPECT_EQ(*facts.first_chat_line, 3);
  const std::string no_template = refusal_message([&] { glacier::app::check_chat_template(o, facts, std::nullopt); });
  EXPECT_EQ(no_template.rfind(chat + ":3: \"messages\" needs a chat template, but the model has no tokenizer.chat_template: "
                                     "pass --chat-template NAME",
                              0),
            0u)
      << no_template;
  EXPECT_NE(refusal_message([&] { glacier::app::check_chat_template(o, facts, std::string("{{ unknown }}")); }).find("unknown chat template"),
            std::string::npos);
  EXPECT_EQ(refusal_message([&] { glacier::app::check_chat_template(o, facts, std::string("{{ '<|im_start|>' + message['role'] }}")); }), "");
  JobOptions named = o;
  named.chat_template = glacier::model::ChatTemplate::Llama3;
  EXPECT_EQ(refusal_message([&] { glacier::app::check_chat_template(named, facts, std::nullopt); }), "");
  // A file without "messages" needs no template.
  const JobOptions plain = options(write_file("plain.jsonl", "{\"prompt\": \"x\"}\n"));
  EXPECT_EQ(refusal_message([&] { glacier::app::check_chat_template(plain, glacier::app::check_prompt_file(plain), std::nullopt); }), "");
}

TEST(InputChecks, ThreadsAboveTheHostsHardwareThreadsNeedTheSwitch) {
  JobOptions o;
  o.threads = 9;
  EXPECT_EQ(refusal_message([&] { glacier::app::check_threads(o, 8, "node1"); }),
            "option --threads: expected at most the 8 hardware threads of host node1 (or --oversubscribe-threads), found 9");
  o.oversubscribe_threads = true;
  EXPECT_EQ(refusal_message([&] { glacier::app::check_threads(o, 8, "node1"); }), "");
  o = JobOptions{};
  o.threads = 8;
  EXPECT_EQ(refusal_message([&] { glacier::app::check_threads(o, 8, "node1"); }), "");
  o.threads = 0;  // the rank's share, chosen from the host
  EXPECT_EQ(refusal_message([&] { glacier::app::check_threads(o, 1, "node1"); }), "");
}

}  // namespace
