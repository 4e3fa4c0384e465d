// Result lines parsed back: exact keys, float32 log-probs that round-trip, invalid UTF-8 replaced by
// the one rule of io/utf8.h, score fields, OpenAI batch lines, input order from out-of-order arrivals; and the UTF-8 helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

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

TEST(IoJsonlWriter, OpenAiBatchLinesForSuccessAndFailure) {
  ResultRecord r = sample_result();
  OpenAiBatchLine meta;
  meta.custom_id = "req-1";
  meta.request_number = 5;
  std::vector<std::string> texts = {" Paris", "\n"};
  meta.token_texts = &texts;
  json j = json::parse(format_openai_batch_line(r, meta));
  EXPECT_EQ(j["id"], "batch_req_5");
  EXPECT_EQ(j["custom_id"], "req-1");
  EXPECT_TRUE(j["error"].is_null());
  EXPECT_EQ(j["response"]["status_code"], 200);
  const json& body = j["response"]["body"];
  EXPECT_EQ(body["object"], "text_completion");
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["text"], " Paris\n");
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(choice["logprobs"]["tokens"], json(texts));
  EXPECT_EQ(choice["logprobs"]["token_logprobs"].size(), 2u);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(body["usage"]["completion_tokens"], 2);
  EXPECT_EQ(body["usage"]["total_tokens"], 5);

  meta.chat = true;
  json c = json::parse(format_openai_batch_line(r, meta));
  EXPECT_EQ(c["response"]["body"]["object"], "chat.completion");
  EXPECT_EQ(c["response"]["body"]["choices"][0]["message"]["content"], " Paris\n");

  r.status = "error";
  r.error = "prompt too long";
  json f = json::parse(format_openai_batch_line(r, meta));
  EXPECT_TRUE(f["response"].is_null());
  EXPECT_EQ(f["error"]["message"], "prompt too long");
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
