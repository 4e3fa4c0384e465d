// Result lines parsed back: exact keys, float32 log-probs that round-trip, invalid UTF-8 replaced by
// the one rule of io/utf8.h, score fields, OpenAI batch lines, input order from out-of-order arrivals; and the UTF-8 helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/openai_batch_schema.h"
#include "common/test_env.h"
#include "io/jsonl_writer.h"
#include "io/utf8.h"

namespace glacier::io {
namespace {

using nlohmann::json;

ResultRecord sample_result() {
  ResultRecord r;
  r.id = "q1";
  r.index = 0;
  r.prompt_tokens = {1, 450, 29871};
  r.tokens = {3681, 13};
  r.text = " Paris\n";
  r.logprobs = {-0.1f, -1.0e-7f};
  r.finish_reason = "length";
  return r;
}

std::vector<std::string> key_list(const json& object) {
  std::vector<std::string> keys;
  for (auto it = object.begin(); it != object.end(); ++it) keys.push_back(it.key());
  std::sort(keys.begin(), keys.end());
  return keys;
}

TEST(IoJsonlWriter, ResultLineHasExactlyTheDocumentedKeys) {
  std::string line = format_result_line(sample_result());
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per result";
  json j = json::parse(line);
  EXPECT_EQ(key_list(j), (std::vector<std::string>{"finish_reason", "id", "logprobs", "prompt_tokens", "sample",
                                                    "status", "text", "tokens"}));
  EXPECT_EQ(j["id"], "q1");
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["prompt_tokens"].get<std::vector<int32_t>>(), (std::vector<int32_t>{1, 450, 29871}));
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), (std::vector<int32_t>{3681, 13}));
  EXPECT_EQ(j["text"], " Paris\n");
  EXPECT_EQ(j["finish_reason"], "length");
}

TEST(IoJsonlWriter, Float32LogprobsRoundTripExactly) {
  ResultRecord r = sample_result();
  r.logprobs = {-0.1f, -1.0e-7f, -12.345678f, std::nextafter(-3.0f, 0.0f), -std::numeric_limits<float>::min(), 0.0f};
  json j = json::parse(format_result_line(r));
  ASSERT_EQ(j["logprobs"].size(), r.logprobs.size());
  for (size_t i = 0; i < r.logprobs.size(); ++i) {
    float back = static_cast<float>(j["logprobs"][i].get<double>());
    EXPECT_EQ(std::memcmp(&back, &r.logprobs[i], sizeof(float)), 0) << "logprob " << i << " = " << r.logprobs[i];
  }
  EXPECT_NE(format_result_line(r).find("-0.1,"), std::string::npos) << "shortest float form expected";
}

TEST(IoJsonlWriter, InvalidUtf8TextIsReplacedNotThrown) {
  ResultRecord r = sample_result();
  r.text = "caf\xC3";  // a token boundary inside "é"
  std::string line;
  ASSERT_NO_THROW(line = format_result_line(r));
  json j = json::parse(line);
  EXPECT_EQ(j["text"], "caf\xEF\xBF\xBD");
}

TEST(IoJsonlWriter, EveryStringFollowsTheOneRepairRule) {
  ResultRecord r = sample_result();
  r.id = "q\xFF" "1";
  r.status = "error";
  r.error = "line 3: found \xE0\x80\x80";  // overlong: three bad bytes, three U+FFFD
  r.text = std::string("a\0b\xF0\x9F\x98", 6);  // a NUL is valid UTF-8 and stays in JSON
  const json j = json::parse(format_result_line(r));
  EXPECT_EQ(j["id"], replace_invalid_utf8(r.id));
  EXPECT_EQ(j["error"], replace_invalid_utf8(r.error));
  EXPECT_EQ(j["text"], replace_invalid_utf8(r.text));
  EXPECT_EQ(j["text"], std::string("a\0b\xEF\xBF\xBD", 6));
}

TEST(IoJsonlWriter, ErrorAndScoreFieldsAppearOnlyWhenRelevant) {
  ResultRecord failed;
  failed.id = "bad";
  failed.status = "error";
  failed.error = "prompts.jsonl:3: \"top_p\": expected a number in (0, 1], found 2";
  failed.finish_reason = "error";
  json e = json::parse(format_result_line(failed));
  EXPECT_EQ(e["error"], failed.error);
  EXPECT_FALSE(e.contains("sum_logprob"));
  EXPECT_TRUE(e["tokens"].empty());

  ResultRecord score = sample_result();
  score.score = true;
  score.sum_logprob = -3.25;
  score.greedy = true;
  json s = json::parse(format_result_line(score));
  EXPECT_FALSE(s.contains("error"));
  EXPECT_EQ(s["sum_logprob"].get<double>(), -3.25);
  EXPECT_EQ(s["greedy"], true);
}

// A continuations line: its continuations in index order with the documented fields, the two
// normalised scores (by hand: -3.25 over 2 tokens and over the 7 bytes of " Paris\n"), and a failed
// continuation marking the whole line.
TEST(IoJsonlWriter, ContinuationsLineHoldsEveryContinuationWithItsNormalisedScores) {
  ResultRecord first = sample_result();
  first.score = true;
  first.sum_logprob = -3.25;
  first.greedy = true;
  ResultRecord second = first;
  second.sample = 1;
  second.greedy = false;
  json line = json::parse(format_continuations_line({first, second}, {7, 4}));
  EXPECT_EQ(key_list(line), (std::vector<std::string>{"continuations", "id", "prompt_tokens", "status"}));
  EXPECT_EQ(line["status"], "ok");
  ASSERT_EQ(line["continuations"].size(), 2u);
  const json& c0 = line["continuations"][0];
  EXPECT_EQ(key_list(c0), (std::vector<std::string>{"greedy", "index", "logprob_per_byte", "logprob_per_token",
                                                      "logprobs", "status", "sum_logprob", "text", "tokens"}));
  EXPECT_EQ(c0["index"], 0);
  EXPECT_EQ(c0["logprob_per_token"].get<double>(), -1.625);
  EXPECT_EQ(c0["logprob_per_byte"].get<double>(), -3.25 / 7);
  EXPECT_EQ(line["continuations"][1]["index"], 1);
  EXPECT_EQ(line["continuations"][1]["logprob_per_byte"].get<double>(), -0.8125);  // over 4 bytes
  EXPECT_EQ(line["continuations"][1]["greedy"], false);

  second.status = "error";
  second.error = "p.jsonl:2: \"continuations[1]\": the continuation tokenizes to nothing";
  json failed = json::parse(format_continuations_line({first, second}, {7, 4}));
  EXPECT_EQ(failed["status"], "error");
  EXPECT_EQ(failed["error"], second.error);
  EXPECT_EQ(failed["continuations"][1]["error"], second.error);
  EXPECT_FALSE(failed["continuations"][1].contains("sum_logprob"));
  EXPECT_TRUE(failed["continuations"][0].contains("sum_logprob"));
}

// A small vocabulary for the token texts: id 3681 " Paris", 13 "\n", others "t<id>", 99 a lone UTF-8 lead byte.
std::string token_text(int32_t id) {
  if (id == 3681) return " Paris";
  if (id == 13) return "\n";
  if (id == 99) return "\xC3";
  return "t" + std::to_string(id);
}

// OpenAI batch-line metadata of request `number` named custom_id, answered by tiny.gguf with the token
// texts above.
OpenAiBatchLine tiny_batch_line(const std::string& custom_id, int64_t number) {
  OpenAiBatchLine meta;
  meta.custom_id = custom_id;
  meta.request_number = number;
  meta.model = "tiny.gguf";
  meta.created = 1700000000;
  meta.token_text = token_text;
  return meta;
}

// sample_result() with k alternatives per token: the chosen token first, then ids 99, 100, ...
ResultRecord with_top(int32_t k) {
  ResultRecord r = sample_result();
  r.top_logprobs = k;
  for (size_t t = 0; t < r.tokens.size(); ++t)
    for (int32_t j = 0; j < k; ++j) {
      r.top_ids.push_back(j == 0 ? r.tokens[t] : 98 + j);
      r.top_values.push_back(j == 0 ? r.logprobs[t] : -2.0f - static_cast<float>(j));
    }
  return r;
}

TEST(IoJsonlWriter, GlacierLineCarriesTopLogprobsOnlyWhenAsked) {
  EXPECT_FALSE(json::parse(format_result_line(sample_result(), token_text)).contains("top_logprobs"));
  const json j = json::parse(format_result_line(with_top(3), token_text));
  ASSERT_TRUE(j["top_logprobs"].is_array());
  ASSERT_EQ(j["top_logprobs"].size(), 2u) << "one list per generated token";
  for (size_t t = 0; t < 2; ++t) {
    const json& alternatives = j["top_logprobs"][t];
    ASSERT_EQ(alternatives.size(), 3u);
    for (const json& a : alternatives) EXPECT_EQ(key_list(a), (std::vector<std::string>{"id", "logprob", "token"}));
    EXPECT_EQ(alternatives[0]["id"], j["tokens"][t]);
    EXPECT_EQ(alternatives[0]["logprob"], j["logprobs"][t]);
    EXPECT_EQ(alternatives[1]["id"], 99);
    EXPECT_EQ(alternatives[1]["token"], "\xEF\xBF\xBD") << "invalid UTF-8 repaired as everywhere else";
    EXPECT_EQ(alternatives[2]["token"], "t100");
    EXPECT_EQ(alternatives[2]["logprob"].get<float>(), -4.0f);
  }
  EXPECT_EQ(j["top_logprobs"][0][0]["token"], " Paris");
}

// sample_result() with prompt log-probs of k alternatives: prompt token t (t >= 1) has log-prob -t/2, its
// alternatives ids 99, 100, ... (log-probs -0.25, -1.25, ...); the first token the "no value" markers.
ResultRecord with_prompt_logprobs(int32_t k) {
  ResultRecord r = sample_result();
  r.prompt_logprobs = k;
  r.prompt_logprob_values = {std::numeric_limits<float>::quiet_NaN()};
  r.prompt_top_ids.assign(static_cast<size_t>(k), kNoTokenId);
  r.prompt_top_values.assign(static_cast<size_t>(k), std::numeric_limits<float>::quiet_NaN());
  for (size_t t = 1; t < r.prompt_tokens.size(); ++t) {
    r.prompt_logprob_values.push_back(-0.5f * static_cast<float>(t));
    for (int32_t j = 0; j < k; ++j) {
      r.prompt_top_ids.push_back(99 + j);
      r.prompt_top_values.push_back(-0.25f - static_cast<float>(j));
    }
  }
  return r;
}

TEST(IoJsonlWriter, PromptLogprobsInTheGlacierAndVllmShapes) {
  EXPECT_FALSE(json::parse(format_result_line(sample_result(), token_text)).contains("prompt_logprobs"));
  const json j = json::parse(format_result_line(with_prompt_logprobs(2), token_text));
  const json& plp = j["prompt_logprobs"];
  ASSERT_EQ(plp.size(), 3u) << "one entry per prompt token";
  EXPECT_TRUE(plp[0].is_null());
  for (size_t t = 1; t < 3; ++t) {
    EXPECT_EQ(key_list(plp[t]), (std::vector<std::string>{"id", "logprob", "token", "top_logprobs"}));
    EXPECT_EQ(plp[t]["id"], j["prompt_tokens"][t]);
    EXPECT_EQ(plp[t]["token"], token_text(j["prompt_tokens"][t].get<int32_t>()));
    EXPECT_EQ(plp[t]["logprob"].get<float>(), -0.5f * static_cast<float>(t));
    ASSERT_EQ(plp[t]["top_logprobs"].size(), 2u);
    EXPECT_EQ(plp[t]["top_logprobs"][1]["id"], 100);
    EXPECT_EQ(plp[t]["top_logprobs"][1]["token"], "t100");
    EXPECT_EQ(plp[t]["top_logprobs"][1]["logprob"].get<float>(), -1.25f);
  }
  // k = 0: the tokens' own log-probs, no alternatives.
  EXPECT_TRUE(json::parse(format_result_line(with_prompt_logprobs(0), token_text))["prompt_logprobs"][1]["top_logprobs"].empty());

  // OpenAI completions: every choice of the prompt carries vLLM's dicts (the prompt token, rank null when
  // it is not among the k, and the k ranked 1..k); chat: once, on the response.
  OpenAiBatchLine meta = tiny_batch_line("req", 1);
  meta.prompt_logprobs = true;
  meta.n = 2;
  ResultRecord second = sample_result();
  second.sample = 1;
  const std::vector<ResultRecord> choices = {with_prompt_logprobs(2), second};
  const json line = json::parse(format_openai_batch_line(choices, meta));
  for (size_t i = 0; i < 2; ++i) {
    const json& v = line["response"]["body"]["choices"][i]["prompt_logprobs"];
    ASSERT_EQ(v.size(), 3u) << i;
    EXPECT_TRUE(v[0].is_null());
    EXPECT_EQ(v[1], json::parse(R"({"450": {"logprob": -0.5, "rank": null, "decoded_token": "t450"},
                                    "99": {"logprob": -0.25, "rank": 1, "decoded_token": "\uFFFD"},
                                    "100": {"logprob": -1.25, "rank": 2, "decoded_token": "t100"}})"));
  }
  meta.chat = true;
  meta.n = 1;
  const json chat = json::parse(format_openai_batch_line(with_prompt_logprobs(1), meta));
  EXPECT_EQ(chat["response"]["body"]["prompt_logprobs"].size(), 3u);
  EXPECT_FALSE(chat["response"]["body"]["choices"][0].contains("prompt_logprobs"));
}

TEST(IoJsonlWriter, OpenAiBatchLinesHaveEveryDocumentedField) {
  using glacier::testing::OpenAiLineExpectation;
  using glacier::testing::openai_line_problems;
  auto problems_text = [](const std::vector<std::string>& problems) {
    std::string all;
    for (const auto& p : problems) all += p + "\n";
    return all;
  };
  OpenAiBatchLine meta = tiny_batch_line("req-1", 5);
  for (bool chat : {false, true})
    for (int32_t k : {-1, 0, 2}) {  // -1: no log-probs asked
      SCOPED_TRACE(std::string(chat ? "chat" : "completions") + " k " + std::to_string(k));
      meta.chat = chat;
      meta.logprobs = k >= 0;
      const ResultRecord r = with_top(std::max(k, 0));
      const json j = json::parse(format_openai_batch_line(r, meta));
      EXPECT_EQ(problems_text(openai_line_problems(j, {chat, true, k >= 0, std::max(k, 0), 1})), "") << j.dump();
      EXPECT_EQ(j["id"], "batch_req_5");
      EXPECT_EQ(j["custom_id"], "req-1");
      EXPECT_EQ(j["response"]["request_id"], "req_5");
      const json& body = j["response"]["body"];
      EXPECT_EQ(body["id"], chat ? "chatcmpl-5" : "cmpl-5");
      EXPECT_EQ(body["created"], 1700000000);
      EXPECT_EQ(body["model"], "tiny.gguf");
      EXPECT_EQ(body["usage"], json({{"prompt_tokens", 3}, {"completion_tokens", 2}, {"total_tokens", 5}}));
      const json& choice = body["choices"][0];
      EXPECT_EQ(choice["finish_reason"], "length");
      EXPECT_EQ(chat ? choice["message"]["content"] : choice["text"], " Paris\n");
      if (k < 0) continue;
      if (chat) {
        const json& content = choice["logprobs"]["content"];
        EXPECT_EQ(content[0]["token"], " Paris");
        EXPECT_EQ(content[0]["bytes"], json({32, 80, 97, 114, 105, 115}));
        EXPECT_EQ(content[1]["logprob"].get<float>(), -1.0e-7f);
        if (k == 2) {
          EXPECT_EQ(content[1]["top_logprobs"][0]["token"], "\n");
          EXPECT_EQ(content[1]["top_logprobs"][1]["bytes"], json({0xC3})) << "the raw bytes of a partial character";
        }
      } else {
        const json& lp = choice["logprobs"];
        EXPECT_EQ(lp["tokens"], json({" Paris", "\n"}));
        EXPECT_EQ(lp["text_offset"], json({0, 6}));
        EXPECT_EQ(lp["token_logprobs"][0].get<float>(), -0.1f);
        if (k == 2) {
          EXPECT_EQ(lp["top_logprobs"][0], json({{" Paris", -0.1}, {"\xEF\xBF\xBD", -3.0}}));
        }
      }
    }

  // Several choices for one request (n samples, or the elements of a prompt array): numbered in order,
  // usage summed, the prompt counted once per element.
  meta.chat = false;
  meta.logprobs = false;
  meta.n = 2;
  const json several = json::parse(format_openai_batch_line(std::vector<ResultRecord>{sample_result(), sample_result(), sample_result(), sample_result()}, meta));
  EXPECT_EQ(problems_text(openai_line_problems(several, {false, true, false, 0, 4})), "") << several.dump();
  EXPECT_EQ(several["response"]["body"]["usage"], json({{"prompt_tokens", 6}, {"completion_tokens", 8}, {"total_tokens", 14}}));
  meta.n = 1;

  ResultRecord failed = sample_result();
  failed.status = "error";
  failed.error = "prompt too long";
  for (bool bad_request : {true, false}) {
    meta.bad_request = bad_request;
    const json f = json::parse(format_openai_batch_line(failed, meta));
    EXPECT_EQ(problems_text(openai_line_problems(f, {false, false})), "") << f.dump();
    EXPECT_EQ(f["error"]["message"], "prompt too long");
    EXPECT_EQ(f["error"]["code"], bad_request ? "invalid_request" : "request_failed");
    EXPECT_EQ(f["response"]["body"]["error"]["message"], "prompt too long");
  }
}

// The checker must catch what it is there for: a missing field, a wrong type, an unknown key.
TEST(IoJsonlWriter, OpenAiLineCheckerRejectsWrongLines) {
  OpenAiBatchLine meta;
  meta.custom_id = "c";
  meta.request_number = 1;
  meta.model = "m";
  meta.created = 1;
  json good = json::parse(format_openai_batch_line(sample_result(), meta));
  ASSERT_TRUE(glacier::testing::openai_line_problems(good, {}).empty());
  json missing = good;
  missing["response"]["body"].erase("usage");
  EXPECT_FALSE(glacier::testing::openai_line_problems(missing, {}).empty());
  json wrong_type = good;
  wrong_type["response"]["body"]["created"] = "1";
  EXPECT_FALSE(glacier::testing::openai_line_problems(wrong_type, {}).empty());
  json extra = good;
  extra["response"]["body"]["choices"][0]["extra"] = 1;
  EXPECT_FALSE(glacier::testing::openai_line_problems(extra, {}).empty());
  EXPECT_FALSE(glacier::testing::openai_line_problems(good, {.logprobs = true}).empty()) << "log-probs were asked";
}

TEST(IoJsonlWriter, OrderedWriterEmitsInInputOrder) {
  std::string path = glacier::testing::scratch_dir("io_jsonl") + "/out.jsonl";
  {
    OrderedLineWriter writer(path);
    for (int64_t index : {2, 0, 3, 1}) {
      ResultRecord r = sample_result();
      r.index = index;
      r.id = "p" + std::to_string(index);
      writer.put(index, format_result_line(r));
    }
    EXPECT_EQ(writer.waiting(), 0u);
    EXPECT_EQ(writer.next_index(), 4);
    writer.skip(4);  // done in an earlier run
    ResultRecord late = sample_result();
    late.id = "p5";
    writer.put(5, format_result_line(late));
    writer.finish();
  }
  std::vector<std::string> ids;
  std::string text = glacier::testing::read_text(path);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    ids.push_back(json::parse(text.substr(pos, end - pos))["id"]);
    pos = end + 1;
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"p0", "p1", "p2", "p3", "p5"}));
}

TEST(IoUtf8, FindsAndReplacesIllFormedSequences) {
  EXPECT_FALSE(find_invalid_utf8("plain ascii, \xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80").has_value());
  EXPECT_EQ(find_invalid_utf8("ab\xC3"), 2u);               // truncated
  EXPECT_EQ(find_invalid_utf8("\xC0\xAF"), 0u);             // overlong '/'
  EXPECT_EQ(find_invalid_utf8("x\xED\xA0\x80"), 1u);        // UTF-16 surrogate
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);     // past U+10FFFF
  EXPECT_EQ(replace_invalid_utf8("a\xE2\x82z"), "a\xEF\xBF\xBDz");  // one U+FFFD for a cut character
  EXPECT_EQ(replace_invalid_utf8("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(replace_invalid_utf8("ok \xC3\xA9"), "ok \xC3\xA9");
}

// Unicode 15 section 3.9 (U+FFFD substitution of maximal subparts, Table 3-8): each longest prefix
// of a well-formed sequence that is cut short becomes one U+FFFD, every other bad byte one of its own.
// Python's and WHATWG's decoders follow the same practice, so readers of text_bytes can redo it.
TEST(IoUtf8, ReplacesEachMaximalSubpartWithOneReplacement) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(replace_invalid_utf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + r + r + r + "b" + r + "c" + r + r + "d");  // the table's own example
  EXPECT_EQ(replace_invalid_utf8("\xE0\x80\x80"), r + r + r);  // E0 cannot be followed by 80: overlong
  EXPECT_EQ(replace_invalid_utf8("\xED\xA0\x80"), r + r + r);  // surrogate
  EXPECT_EQ(replace_invalid_utf8("\xF0\x9F\x98"), r);          // a cut 4-byte character
  EXPECT_EQ(replace_invalid_utf8("\xF5\x80"), r + r);          // F5 starts nothing
  EXPECT_EQ(find_invalid_utf8("ab\xF0\x9F\x98"), 2u);
}

TEST(IoUtf8, NulIsKeptOrReplacedOnRequest) {
  const std::string with_nul("a\0b\xC3", 4);
  EXPECT_EQ(replace_invalid_utf8(with_nul), std::string("a\0b\xEF\xBF\xBD", 6));
  EXPECT_EQ(replace_invalid_utf8_and_nul(with_nul), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  EXPECT_EQ(replace_invalid_utf8_and_nul("plain \xC3\xA9"), "plain \xC3\xA9");
}

}  // namespace
}  // namespace glacier::io
