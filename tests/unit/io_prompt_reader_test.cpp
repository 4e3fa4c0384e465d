// Prompt files: .txt and .jsonl (plain and OpenAI batch lines), bad lines isolated with their own
// messages, blank lines, CRLF, BOM, duplicate ids, and whole-file errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "common/test_env.h"
#include "io/prompt_reader.h"
#include "io/utf8.h"
#include "util/error.h"

namespace glacier::io {
namespace {

std::string write_file(const std::string& name, const std::string& contents) {
  std::string path = glacier::testing::scratch_dir("io_prompts") + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

// Every record read without an error, in `format`.
void expect_all_read(const std::vector<PromptRecord>& records, PromptFormat format) {
  for (const auto& r : records) {
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.format, format);
  }
}

TEST(IoPromptReader, TextFileOnePromptPerLineWithLineNumberIds) {
  std::string path = write_file("p.txt", "\xEF\xBB\xBFHello world\r\n\n   \nSecond prompt\nthird");
  auto records = read_prompts(path);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(*records[0].prompt, "Hello world");  // BOM and \r stripped
  EXPECT_EQ(records[0].id, "1");
  EXPECT_EQ(records[0].line, 1);
  EXPECT_EQ(records[0].index, 0);
  EXPECT_EQ(records[1].id, "4");
  EXPECT_EQ(records[1].index, 1);
  EXPECT_EQ(*records[2].prompt, "third");  // no final newline
  EXPECT_EQ(records[2].line, 5);
  expect_all_read(records, PromptFormat::Text);
}

TEST(IoPromptReader, TextLineWithInvalidUtf8IsAnErrorRecord) {
  std::string path = write_file("bad.txt", "good\nbad \xC3\x28 byte\nalso good\n");
  auto records = read_prompts(path);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_TRUE(records[0].ok);
  EXPECT_FALSE(records[1].ok);
  EXPECT_NE(records[1].error.find(path + ":2:"), std::string::npos) << records[1].error;
  EXPECT_NE(records[1].error.find("UTF-8"), std::string::npos) << records[1].error;
  EXPECT_NE(records[1].error.find("0xC3"), std::string::npos) << records[1].error;
  EXPECT_TRUE(records[2].ok);
}

TEST(IoPromptReader, PlainJsonlWithAllFields) {
  std::string path = write_file(
      "p.jsonl",
      R"({"id": "a", "prompt": "Once", "max_tokens": 16, "temperature": 0.7, "top_k": 40, "top_p": 0.9, "min_p": 0.05, "seed": 18446744073709551615, "stop": ["\n", "END"]})"
      "\r\n"
      R"({"prompt": ""})"
      "\n"
      R"({"id": 7, "prompt_token_ids": [1, 15043, 0]})"
      "\n"
      R"({"context": "The sky is", "continuation": " blue"})"
      "\n"
      R"({"messages": [{"role": "user", "content": "Hi"}], "temperature": null})"
      "\n");
  auto records = read_prompts(path);
  ASSERT_EQ(records.size(), 5u);
  expect_all_read(records, PromptFormat::Jsonl);
  const auto& a = records[0];
  EXPECT_EQ(a.id, "a");
  EXPECT_EQ(*a.prompt, "Once");
  EXPECT_EQ(*a.max_tokens, 16);
  EXPECT_DOUBLE_EQ(*a.temperature, 0.7);
  EXPECT_EQ(*a.top_k, 40);
  EXPECT_DOUBLE_EQ(*a.top_p, 0.9);
  EXPECT_DOUBLE_EQ(*a.min_p, 0.05);
  EXPECT_EQ(*a.seed, 18446744073709551615ull);
  EXPECT_EQ(*a.stop, (std::vector<std::string>{"\n", "END"}));

  EXPECT_EQ(records[1].id, "2");  // line number when no id
  EXPECT_EQ(*records[1].prompt, "");  // an empty prompt is valid
  EXPECT_FALSE(records[1].temperature.has_value());

  EXPECT_EQ(records[2].id, "7");
  EXPECT_FALSE(records[2].prompt.has_value());
  EXPECT_EQ(*records[2].prompt_token_ids, (std::vector<int32_t>{1, 15043, 0}));

  EXPECT_TRUE(records[3].is_score());
  EXPECT_EQ(*records[3].context, "The sky is");
  EXPECT_EQ(*records[3].continuation, " blue");

  EXPECT_TRUE(records[4].is_chat());
  EXPECT_EQ(nlohmann::json::parse(*records[4].messages_json),
            nlohmann::json::parse(R"([{"role": "user", "content": "Hi"}])"));
  EXPECT_FALSE(records[4].temperature.has_value());  // null means unset
}

TEST(IoPromptReader, OpenAiBatchCompletionAndChatLines) {
  std::string path = write_file(
      "batch.jsonl",
      R"({"custom_id": "req-1", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": "Say hi", "max_tokens": 8, "temperature": 0, "stop": "\n", "seed": 3}})"
      "\n"
      R"({"custom_id": "req-2", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}], "max_completion_tokens": 4, "top_p": 0.5}})"
      "\n"
      R"({"custom_id": "req-3", "url": "/v1/completions", "body": {"prompt": [[5, 6, 7]]}})"
      "\n");
  auto records = read_prompts(path);
  ASSERT_EQ(records.size(), 3u);
  expect_all_read(records, PromptFormat::OpenAiBatch);
  EXPECT_EQ(records[0].id, "req-1");
  EXPECT_EQ(*records[0].custom_id, "req-1");
  EXPECT_EQ(*records[0].prompt, "Say hi");
  EXPECT_EQ(*records[0].max_tokens, 8);
  EXPECT_DOUBLE_EQ(*records[0].temperature, 0.0);
  EXPECT_EQ(*records[0].stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(*records[0].seed, 3u);

  EXPECT_EQ(records[1].id, "req-2");
  ASSERT_TRUE(records[1].is_chat());
  auto messages = nlohmann::json::parse(*records[1].messages_json);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[1]["content"], "2+2?");
  EXPECT_EQ(*records[1].max_tokens, 4);
  EXPECT_DOUBLE_EQ(*records[1].top_p, 0.5);
  EXPECT_FALSE(records[1].prompt.has_value());

  EXPECT_EQ(*records[2].prompt_token_ids, (std::vector<int32_t>{5, 6, 7}));
}

// vLLM's prompt_logprobs on plain lines and OpenAI bodies (completions and chat): 0..20, read as given.
TEST(IoPromptReader, PromptLogprobsIsReadAndRangeChecked) {
  const std::vector<std::pair<std::string, std::optional<int>>> good = {
      {R"({"prompt": "x", "prompt_logprobs": 0})", 0},
      {R"({"prompt": "x", "prompt_logprobs": 20})", 20},
      {R"({"prompt": "x", "prompt_logprobs": null})", std::nullopt},
      {R"({"custom_id": "a", "url": "/v1/completions", "body": {"prompt": "x", "prompt_logprobs": 3}})", 3},
      {R"({"custom_id": "b", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 1}})", 1},
  };
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"prompt": "x", "prompt_logprobs": 21})", "\"prompt_logprobs\": expected an integer in 0..20 (alternatives returned per prompt token), found 21"},
      {R"({"prompt": "x", "prompt_logprobs": -1})", "\"prompt_logprobs\": expected an integer in 0..20"},
      {R"({"prompt": "x", "prompt_logprobs": "2"})", "\"prompt_logprobs\": expected an integer in 0..20 (alternatives returned per prompt token), found the string \"2\""},
      {R"({"prompt": "x", "prompt_logprobs": true})", "\"prompt_logprobs\": expected an integer in 0..20"},
      {R"({"custom_id": "c", "url": "/v1/completions", "body": {"prompt": "x", "prompt_logprobs": 1.5}})", "\"body.prompt_logprobs\": expected an integer in 0..20"},
  };
  std::string contents;
  for (const auto& [line, k] : good) contents += line + "\n";
  for (const auto& [line, part] : bad) contents += line + "\n";
  const std::string path = write_file("prompt_logprobs.jsonl", contents);
  const auto records = read_prompts(path);
  ASSERT_EQ(records.size(), good.size() + bad.size());
  for (size_t i = 0; i < good.size(); ++i) {
    ASSERT_TRUE(records[i].ok) << records[i].error;
    EXPECT_EQ(records[i].prompt_logprobs, good[i].second) << good[i].first;
  }
  for (size_t i = 0; i < bad.size(); ++i) {
    const PromptRecord& r = records[good.size() + i];
    EXPECT_FALSE(r.ok) << bad[i].first;
    EXPECT_NE(r.error.find(path + ":" + std::to_string(good.size() + i + 1) + ": " + bad[i].second), std::string::npos) << r.error;
  }
}

// A completions "prompt" array: several strings or several token-id lists become the record's prompt list
// (one element each), one element is that prompt itself, and every malformed array fails by name.
TEST(IoPromptReader, CompletionPromptArrays) {
  const std::vector<std::string> bodies = {R"(["a", "b c", ""]})", R"([[1, 2], [3]]})", R"(["only"]})",
                                           R"([]})",  R"(["a", [1]]})", R"([[1], "a"]})", R"([null]})",
                                           R"(["a", "b"], "n": 65})", R"(["a", "b"], "n": 64})"};
  std::string contents;
  for (size_t i = 0; i < bodies.size(); ++i)
    contents += R"({"custom_id": "c)" + std::to_string(i) + R"(", "url": "/v1/completions", "body": {"prompt": )" + bodies[i] + "}\n";
  const std::string path = write_file("arrays.jsonl", contents);
  const auto records = read_prompts(path);
  ASSERT_EQ(records.size(), 9u);
  ASSERT_TRUE(records[0].ok) << records[0].error;
  EXPECT_EQ(*records[0].prompt_list, (std::vector<std::string>{"a", "b c", ""}));
  EXPECT_EQ(records[0].prompt_elements(), 3u);
  EXPECT_FALSE(records[0].prompt.has_value());
  ASSERT_TRUE(records[1].ok) << records[1].error;
  EXPECT_EQ(*records[1].prompt_token_ids_list, (std::vector<std::vector<int32_t>>{{1, 2}, {3}}));
  ASSERT_TRUE(records[2].ok) << records[2].error;
  EXPECT_EQ(*records[2].prompt, "only");
  EXPECT_FALSE(records[2].prompt_list.has_value());
  EXPECT_EQ(records[2].prompt_elements(), 1u);
  const std::vector<std::pair<size_t, std::string>> refused = {
      {3, "\"body.prompt\": expected a string, an array of token ids, or a non-empty array of prompts"},
      {4, "\"body.prompt[1]\": expected a string, as the array's first prompt is"},
      {5, "\"body.prompt[1]\": expected an array of token ids, as the array's first prompt is"},
      {6, "\"body.prompt[0]\": expected a string or an array of token ids, found null"},
      {7, "\"body.n\": expected at most 128 choices in all (2 prompts x n), found 65"}};
  for (const auto& [i, part] : refused) {
    EXPECT_FALSE(records[i].ok) << i;
    EXPECT_NE(records[i].error.find(path + ":" + std::to_string(i + 1) + ": " + part), std::string::npos) << records[i].error;
  }
  EXPECT_TRUE(records[8].ok) << records[8].error;
}

// Each bad line must fail on its own with a message naming the file, its line and the offending key;
// every good line among them still loads.
TEST(IoPromptReader, BadLinesAreIsolatedWithTheirOwnMessages) {
  struct Case {
    std::string line;
    std::vector<std::string> message_parts;  // all must appear in the error
  };
  const std::vector<Case> bad = {
      {R"({"prompt": "x")", {"invalid JSON"}},
      {R"(["not", "an", "object"])", {"expected a JSON object", "an array with 3 elements"}},
      {R"({"id": "q"})", {"no prompt"}},
      {R"({"prompt": 42})", {"\"prompt\"", "expected a string", "42"}},
      {R"({"prompt": "x", "temperature": -0.5})", {"\"temperature\"", ">= 0", "-0.5"}},
      {R"({"prompt": "x", "top_p": 0})", {"\"top_p\"", "(0, 1]", "found 0"}},
      {R"({"prompt": "x", "top_p": 1.5})", {"\"top_p\"", "1.5"}},
      {R"({"prompt": "x", "top_k": -1})", {"\"top_k\"", "-1"}},
      {R"({"prompt": "x", "max_tokens": -3})", {"\"max_tokens\"", "-3"}},
      {R"({"prompt": "x", "max_tokens": 2.5})", {"\"max_tokens\"", "integer", "2.5"}},
      {R"({"prompt": "x", "stop": "END"})", {"\"stop\"", "array of strings", "the string \"END\""}},
      {R"({"prompt": "x", "stop": ["a", 3]})", {"\"stop\"", "every item", "3"}},
      {R"({"prompt_token_ids": [1, -2]})", {"\"prompt_token_ids\"", ">= 0", "-2"}},
      {R"({"prompt": "x", "seed": -1})", {"\"seed\"", "-1"}},
      {R"({"context": "a"})", {"\"continuation\"", "no such key"}},
      {R"({"context": "a", "continuations": []})", {"\"continuations\"", "non-empty list", "an array with 0 elements"}},
      {R"({"context": "a", "continuations": " b"})", {"\"continuations\"", "non-empty list", "the string \" b\""}},
      {R"({"context": "a", "continuations": [" b", 7]})", {"\"continuations[1]\"", "non-empty string", "7"}},
      {R"({"context": "a", "continuations": [" b", ""]})", {"\"continuations[1]\"", "non-empty string", "the string \"\""}},
      {R"({"context": "a", "continuation": " b", "continuations": [" c"]})",
       {"\"continuations\"", "beside \"continuation\""}},
      {R"({"prompt": "x", "prompt_token_ids": [1]})", {"only one of", "found 2"}},
      {R"({"custom_id": "c", "url": "/v1/embeddings", "body": {"input": "x"}})", {"\"url\"", "/v1/embeddings"}},
      {R"({"custom_id": "c2", "url": "/v1/chat/completions", "body": {"messages": "hi"}})",
       {"\"body.messages\"", "the string \"hi\""}},
      {R"({"custom_id": "c3", "url": "/v1/completions", "body": {"prompt": "x", "n": 129}})", {"\"body.n\"", "129"}},
  };
  std::string contents = "{\"prompt\": \"good first\"}\n";
  for (const auto& c : bad) contents += c.line + "\n{\"prompt\": \"good\"}\n";
  std::string path = write_file("mixed.jsonl", contents);

  auto records = read_prompts(path);
  ASSERT_EQ(records.size(), 1 + 2 * bad.size());
  EXPECT_TRUE(records[0].ok) << records[0].error;
  std::set<std::string> messages;
  for (size_t i = 0; i < bad.size(); ++i) {
    const auto& r = records[1 + 2 * i];
    const auto& good = records[2 + 2 * i];
    EXPECT_TRUE(good.ok) << good.error;
    EXPECT_EQ(*good.prompt, "good");
    ASSERT_FALSE(r.ok) << "line " << r.line << " should be rejected: " << bad[i].line;
    EXPECT_FALSE(r.prompt.has_value());
    std::string where = path + ":" + std::to_string(r.line) + ":";
    EXPECT_EQ(r.error.rfind(where, 0), 0u) << r.error;
    for (const auto& part : bad[i].message_parts)
      EXPECT_NE(r.error.find(part), std::string::npos) << "missing \"" << part << "\" in: " << r.error;
    messages.insert(r.error.substr(where.size()));
  }
  EXPECT_EQ(messages.size(), bad.size()) << "each kind of bad line should have its own message";
}

// Every key of a line is honoured or refused by name: a misspelt or unknown key fails its line (with the
// key it was probably meant to be), a key the API defines but glacier-mpi does not implement fails unless
// it holds the value that asks for nothing, and an OpenAI body's "model" and "user" are accepted metadata.
TEST(IoPromptReader, KeysThatAreNotHonouredFailTheirLineByName) {
  struct Case {
    std::string line;
    bool ok;
    std::vector<std::string> message_parts;
  };
  const std::vector<Case> cases = {
      {R"({"id": "t", "prompt": "x", "temprature": 0.5})", false,
       {"\"temprature\": unknown key (did you mean \"temperature\"?)", "expected one of id, prompt"}},
      {R"({"prompt": "x", "max-tokens": 5})", false, {"\"max-tokens\"", "did you mean \"max_tokens\""}},
      {R"({"prompt": "x", "colour": "red"})", false, {"\"colour\": unknown key: expected one of"}},
      {R"({"prompt": "x", "n": 2})", true, {}},
      {R"({"prompt": "x", "n": 128})", true, {}},
      {R"({"prompt": "x", "n": 129})", false, {"\"n\": expected an integer in 1..128", "found 129"}},
      {R"({"prompt": "x", "n": 0})", false, {"\"n\": expected an integer in 1..128", "found 0"}},
      {R"({"prompt": "x", "n": 1.5})", false, {"\"n\": expected an integer in 1..128"}},
      {R"({"custom_id": "c0", "url": "/v1/completions", "body": {"prompt": "x", "n": 2}})", true, {}},
      {R"({"custom_id": "c0", "url": "/v1/completions", "body": {"prompt": "x", "n": 0}})", false,
       {"\"body.n\": expected an integer in 1..128", "found 0"}},
      {R"({"prompt": "x", "logprobs": 5})", false, {"\"logprobs\": not implemented", "found 5"}},
      {R"({"prompt": "x", "logprobs": true, "top_logprobs": 0})", true, {}},
      {R"({"prompt": "x", "stop_token_ids": [13, 2]})", true, {}},
      {R"({"prompt": "x", "stop_token_ids": []})", true, {}},
      {R"({"prompt": "x", "stop_token_ids": [13, 13]})", false, {"\"stop_token_ids\"", "distinct token ids", "(each once)", "found 13"}},
      {R"({"prompt": "x", "stop_token_ids": [-1]})", false, {"\"stop_token_ids\"", "integers >= 0", "found -1"}},
      {R"({"prompt": "x", "stop_token_ids": 13})", false, {"\"stop_token_ids\"", "an array of at most 1024", "found 13"}},
      {R"({"prompt": "x", "ignore_eos": true, "include_stop_str_in_output": false})", true, {}},
      {R"({"prompt": "x", "ignore_eos": 1})", false, {"\"ignore_eos\": expected true or false, found 1"}},
      {R"({"prompt": "x", "include_stop_str_in_output": "yes"})", false, {"\"include_stop_str_in_output\": expected true or false"}},
      {R"({"prompt": "x", "repetition_penalty": 1.1, "presence_penalty": -2, "frequency_penalty": 2})", true, {}},
      {R"({"prompt": "x", "repetition_penalty": 0})", false, {"\"repetition_penalty\": expected a finite number > 0", "found 0"}},
      {R"({"prompt": "x", "presence_penalty": 2.5})", false, {"\"presence_penalty\": expected a number in [-2, 2]", "found 2.5"}},
      {R"({"prompt": "x", "frequency_penalty": -2.01})", false, {"\"frequency_penalty\": expected a number in [-2, 2]", "found -2.01"}},
      {R"({"prompt": "x", "min_tokens": 3, "max_tokens": 5})", true, {}},
      {R"({"prompt": "x", "min_tokens": 6, "max_tokens": 5})", false, {"\"min_tokens\": expected at most \"max_tokens\" (5)", "found 6"}},
      {R"({"prompt": "x", "min_tokens": -1})", false, {"\"min_tokens\": expected an integer >= 0", "found -1"}},
      {R"({"prompt": "x", "logit_bias": {"13": -100, "2": 100, "7": 0.5}})", true, {}},
      {R"({"prompt": "x", "logit_bias": {"13": 101}})", false, {"\"logit_bias.13\": expected a bias in [-100, 100], found 101"}},
      {R"({"prompt": "x", "logit_bias": {"x13": 1}})", false, {"\"logit_bias\"", "ids decimal integers >= 0", "\"x13\""}},
      {R"({"prompt": "x", "logit_bias": {"13": 1, "013": 2}})", false, {"\"logit_bias\"", "(each id once)", "13 twice"}},
      {R"({"prompt": "x", "logit_bias": [13]})", false, {"\"logit_bias\": expected an object", "an array with 1 elements"}},
      {R"({"prompt": "x", "typical_p": 0.5})", false, {"\"typical_p\": not implemented", "found 0.5"}},
      {R"({"prompt": "x", "model": "m"})", false, {"\"model\": unknown key"}},
      {R"({"prompt": "x", "temperature": 1e39})", false, {"\"temperature\"", "a finite number >= 0", "1e+39"}},
      {R"({"custom_id": "c", "prompt": "x"})", false, {"\"body\": expected an object", "no such key"}},
      {R"({"custom_id": "c1", "url": "/v1/completions", "body": {"prompt": "x", "model": "gpt", "user": "u", "stream": false}})",
       true, {}},
      {R"({"custom_id": "c2", "url": "/v1/completions", "body": {"prompt": "x", "temprature": 1}})", false,
       {"\"body.temprature\": unknown key (did you mean \"body.temperature\"?)"}},
      {R"({"custom_id": "c3", "url": "/v1/completions", "body": {"prompt": "x", "suffix": "END"}})", false,
       {"\"body.suffix\": not implemented", "the string \"END\""}},
      {R"({"custom_id": "c4", "url": "/v1/completions", "body": {"messages": []}})", false, {"\"body.messages\": unknown key"}},
      {R"({"custom_id": "c5", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}})",
       false, {"\"body.tools\": not implemented"}},
      {R"({"custom_id": "c6", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "x"}], "max_tokens": 4, "max_completion_tokens": 5}})",
       false, {"\"body.max_completion_tokens\"", "the same value as \"max_tokens\" (4)", "found 5"}},
      {R"({"custom_id": "c7", "url": "/v1/completions", "body": {"prompt": "x"}, "extra": 1})", false,
       {"\"extra\": unknown key", "expected one of custom_id, method, url, body"}},
  };
  std::string contents;
  for (const auto& c : cases) contents += c.line + "\n";
  const std::string path = write_file("keys.jsonl", contents);
  const auto records = read_prompts(path);
  ASSERT_EQ(records.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const PromptRecord& r = records[i];
    EXPECT_EQ(r.ok, cases[i].ok) << cases[i].line << " -> " << r.error;
    if (r.ok) continue;
    EXPECT_EQ(r.error.rfind(path + ":" + std::to_string(i + 1) + ": ", 0), 0u) << r.error;
    for (const auto& part : cases[i].message_parts)
      EXPECT_NE(r.error.find(part), std::string::npos) << "missing \"" << part << "\" in: " << r.error;
  }
  EXPECT_EQ(records[0].id, "t") << "a line refused for a key keeps its id";
}

// top_logprobs on plain lines, "logprobs" (a count) on completions bodies and "logprobs" + "top_logprobs"
// on chat bodies: the values as read, and each range or combination the API refuses failing its line by name.
TEST(IoPromptReader, TopLogprobsFieldsAreReadAndRangeChecked) {
  struct Case {
    std::string line;
    bool ok;
    int top_logprobs;         // when ok
    bool openai_logprobs;     // when ok
    std::vector<std::string> message_parts;  // when not ok
  };
  const std::string completion = R"({"custom_id": "c", "url": "/v1/completions", "body": {"prompt": "x", )";
  const std::string chat = R"({"custom_id": "c", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "x"}], )";
  const std::vector<Case> cases = {
      {R"({"prompt": "x", "top_logprobs": 20})", true, 20, false, {}},
      {R"({"prompt": "x", "top_logprobs": 0})", true, 0, false, {}},
      {R"({"prompt": "x", "top_logprobs": 21})", false, 0, false, {"\"top_logprobs\": expected an integer in 0..20", "found 21"}},
      {R"({"prompt": "x", "top_logprobs": -1})", false, 0, false, {"\"top_logprobs\"", "found -1"}},
      {R"({"prompt": "x", "top_logprobs": 2.5})", false, 0, false, {"\"top_logprobs\"", "found 2.5"}},
      {completion + R"("logprobs": 5}})", true, 5, true, {}},
      {completion + R"("logprobs": 0}})", true, 0, true, {}},
      {completion + R"("logprobs": false}})", true, 0, false, {}},
      {completion + R"("max_tokens": 2}})", true, 0, false, {}},
      {completion + R"("logprobs": 21}})", false, 0, false, {"\"body.logprobs\": expected an integer in 0..20", "found 21"}},
      {completion + R"("logprobs": true}})", false, 0, false, {"\"body.logprobs\"", "the completions API takes a count", "found true"}},
      {chat + R"("logprobs": true, "top_logprobs": 3}})", true, 3, true, {}},
      {chat + R"("logprobs": true}})", true, 0, true, {}},
      {chat + R"("top_logprobs": 0}})", true, 0, false, {}},
      {chat + R"("top_logprobs": 3}})", false, 0, false, {"\"body.top_logprobs\"", "\"logprobs\": true beside it", "found 3"}},
      {chat + R"("logprobs": true, "top_logprobs": 25}})", false, 0, false, {"\"body.top_logprobs\"", "0..20", "found 25"}},
      {chat + R"("logprobs": 2}})", false, 0, false, {"\"body.logprobs\": expected true or false", "found 2"}},
  };
  std::string contents;
  for (size_t i = 0; i < cases.size(); ++i) {  // every request line its own custom_id
    std::string line = cases[i].line;
    if (const size_t at = line.find(R"("custom_id": "c")"); at != std::string::npos) line.insert(at + 15, std::to_string(i));
    contents += line + "\n";
  }
  const auto records = read_prompts(write_file("top_logprobs.jsonl", contents));
  ASSERT_EQ(records.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].line);
    const PromptRecord& r = records[i];
    ASSERT_EQ(r.ok, cases[i].ok) << r.error;
    if (r.ok) {
      EXPECT_EQ(r.top_logprobs.value_or(0), cases[i].top_logprobs);
      EXPECT_EQ(r.openai_logprobs, cases[i].openai_logprobs);
      if (r.format == PromptFormat::OpenAiBatch) {
        EXPECT_TRUE(r.top_logprobs.has_value()) << "the body decides, not --top-logprobs";
      }
    }
    for (const auto& part : cases[i].message_parts)
      EXPECT_NE(r.error.find(part), std::string::npos) << "missing \"" << part << "\" in: " << r.error;
  }
}

TEST(IoPromptReader, AHugeUnknownKeyIsClippedInItsMessage) {
  const std::string key(100000, 'k');
  const auto records = read_prompts(write_file("huge_key.jsonl", "{\"prompt\": \"x\", \"" + key + "\": 1}\n"));
  ASSERT_EQ(records.size(), 1u);
  ASSERT_FALSE(records[0].ok);
  EXPECT_NE(records[0].error.find("\"kkkk"), std::string::npos) << records[0].error.substr(0, 200);
  EXPECT_NE(records[0].error.find("...\": unknown key"), std::string::npos) << records[0].error.substr(0, 200);
  EXPECT_LT(records[0].error.size(), 1000u) << "the key is clipped";
}

// Found by prompt_fuzz: a long non-ASCII value quoted in a message was clipped inside a character,
// so the message (written to logs, JSON lines and HDF5) was not valid UTF-8.
TEST(IoPromptReader, ClippedValueInAMessageStaysValidUtf8) {
  std::string japanese;
  for (int i = 0; i < 8; ++i) japanese += "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E";  // 日本語, 9 bytes
  auto records = read_prompts(write_file("clip.jsonl", "{\"prompt\": \"x\", \"temperature\": \"" + japanese + "\"}\n"));
  ASSERT_EQ(records.size(), 1u);
  ASSERT_FALSE(records[0].ok);
  EXPECT_NE(records[0].error.find("\"temperature\""), std::string::npos) << records[0].error;
  EXPECT_NE(records[0].error.find("..."), std::string::npos) << "the value should be clipped: " << records[0].error;
  EXPECT_FALSE(find_invalid_utf8(records[0].error).has_value()) << records[0].error;
}

// Found by prompt_fuzz: a number past double's range is refused by the JSON parser with another kind
// of exception than a syntax error, which escaped the line and ended the whole job.
TEST(IoPromptReader, NumberOutOfRangeFailsOnlyItsLine) {
  auto records = read_prompts(write_file("range.jsonl", "{\"prompt\": \"x\", \"max_tokens\": 2147483e648}\n{\"prompt\": \"ok\"}\n"));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_FALSE(records[0].ok);
  EXPECT_NE(records[0].error.find("range.jsonl:1: expected a JSON object, found invalid JSON (number overflow"), std::string::npos)
      << records[0].error;
  EXPECT_TRUE(records[1].ok) << records[1].error;
}

// Found by prompt_fuzz: a content part without "type" passed the reader, and only the chat template
// refused it when the job built the prompt; the reader now reads messages as the templates do.
TEST(IoPromptReader, MessagesTheTemplatesRefuseFailTheirLine) {
  auto records = read_prompts(write_file("parts.jsonl",
      "{\"messages\": [{\"role\": \"user\", \"content\": [{\"text\": \"hi\"}]}]}\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"hi\"}]}]}\n"));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_FALSE(records[0].ok);
  EXPECT_NE(records[0].error.find("parts.jsonl:1: \"messages\": chat messages JSON: element 0 key \"content\" part 0: "
                                  "expected \"type\": \"text\", found no \"type\""),
            std::string::npos)
      << records[0].error;
  EXPECT_TRUE(records[1].ok) << records[1].error;
}

TEST(IoPromptReader, DuplicateIdIsAnErrorForTheLaterLine) {
  std::string path = write_file("dup.jsonl",
                                "{\"id\": \"x\", \"prompt\": \"a\"}\n{\"id\": \"y\", \"prompt\": \"b\"}\n"
                                "{\"id\": \"x\", \"prompt\": \"c\"}\n{\"prompt\": \"d\"}\n{\"id\": \"4\", \"prompt\": \"e\"}\n");
  auto records = read_prompts(path);
  ASSERT_EQ(records.size(), 5u);
  EXPECT_TRUE(records[0].ok);
  EXPECT_TRUE(records[1].ok);
  EXPECT_FALSE(records[2].ok);
  EXPECT_NE(records[2].error.find("already used on line 1"), std::string::npos) << records[2].error;
  EXPECT_TRUE(records[3].ok);   // id "4" from its line number
  EXPECT_FALSE(records[4].ok);  // explicit "4" clashes with line 4's default id
}

TEST(IoPromptReader, WholeFileProblemsThrowInputError) {
  EXPECT_THROW(read_prompts("/nonexistent/dir/prompts.jsonl"), InputError);
  EXPECT_THROW(read_prompts(write_file("p.csv", "a,b\n")), InputError);
  std::string dir = glacier::testing::scratch_dir("io_prompts_dir") + "/d.txt";
  std::filesystem::create_directory(dir);
  EXPECT_THROW(read_prompts(dir), InputError);
  try {
    read_prompts("/nonexistent/dir/prompts.jsonl");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/prompts.jsonl"), std::string::npos);
  }
}

TEST(IoPromptReader, EmptyFileGivesNoRecords) {
  EXPECT_TRUE(read_prompts(write_file("empty.jsonl", "")).empty());
  EXPECT_TRUE(read_prompts(write_file("blank.txt", "\n \r\n\t\n")).empty());
}

}  // namespace
}  // namespace glacier::io
