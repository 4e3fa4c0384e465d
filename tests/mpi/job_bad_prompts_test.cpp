// A prompt file whose good lines are interleaved with many kinds of bad ones must still finish (exit 0):
// every good line generates, every bad line becomes an error row whose message names the line and the
// problem, rows stay in input order, and the HDF5 /results agrees with the JSONL. On 1 and 2 ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "common/job_runner.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"

namespace {

using glacier::testing::read_jsonl;
using glacier::testing::run_glacier;

constexpr int kMaxTokens = 16;
constexpr int kCtx = 64;               // small, so that one long prompt does not fit
constexpr int kVocab = 512;            // stories260K's vocabulary: ids 0..511
constexpr int kBos = 1;                // stories260K's BOS token id
constexpr int kJobTimeLimitS = 60;     // a few seconds of work; the limit only stops a hung job

// One non-blank input line and what its output row must show.
struct Line {
  std::string text;
  bool good = true;
  std::string id;                    // the row's id; empty: the 1-based line number
  std::vector<std::string> problem;  // bad lines: words the error message must contain
};

std::string long_prompt() {
  std::string s;
  for (int i = 0; i < 30; ++i) s += "Once upon a time there was a little girl who liked to play. ";
  return s;
}

std::vector<Line> jsonl_lines() {
  return {
      {R"({"id": "good-1", "prompt": "Once upon a time"})", true, "good-1", {}},
      {R"({"id": "bad-json", "prompt": "Tom was)", false, "", {"invalid JSON"}},
      {R"({"id": "good-2", "prompt": "Lily saw a big cat", "temperature": 0.8, "seed": 7})", true, "good-2", {}},
      {"{\"id\": \"bad-utf8\", \"prompt\": \"Tom \xFF\xFE went\"}", false, "", {"invalid JSON", "UTF-8"}},
      {R"({"id": "no-prompt", "max_tokens": 4})", false, "no-prompt", {"no prompt", "\"prompt\""}},
      {R"({"id": "good-empty", "prompt": ""})", true, "good-empty", {}},
      {R"({"id": "too-long", "prompt": ")" + long_prompt() + R"("})", false, "too-long",
       {"more than the context of " + std::to_string(kCtx)}},
      {R"({"id": "bad-temperature", "prompt": "Ben ran", "temperature": -1})", false, "bad-temperature",
       {"\"temperature\"", "a finite number >= 0", "-1"}},
      {R"({"prompt": "The sun was warm"})", true, "", {}},
      {R"({"id": "bad-top-p", "prompt": "Ben ran", "top_p": 2})", false, "bad-top-p", {"\"top_p\"", "(0, 1]", "2"}},
      {R"({"id": "big-token", "prompt_token_ids": [1, 200, 512]})", false, "big-token",
       {"prompt_token_ids", "0.." + std::to_string(kVocab - 1), "512"}},
      {R"({"id": "good-ids", "prompt_token_ids": [1, 200, 300, 400]})", true, "good-ids", {}},
      {R"({"id": "bad-stop-items", "prompt": "Sue said", "stop": ["end", 3]})", false, "bad-stop-items",
       {"\"stop\"", "an array of strings"}},
      {R"({"id": "bad-stop-string", "prompt": "Sue said", "stop": "end"})", false, "bad-stop-string",
       {"\"stop\"", "an array of strings", "\"end\""}},
      {R"(["Tom went home"])", false, "", {"expected a JSON object", "an array"}},
      {R"({"id": "good-1", "prompt": "the same id again"})", false, "good-1", {"unique id", "line 1"}},
      {R"({"id": "good-stop", "prompt": "Tom and Ben", "stop": ["zzzzzz"]})", true, "good-stop", {}},
  };
}

// Writes the lines with a blank and a whitespace-only line among them (both skipped); returns the
// 1-based file line of each entry of `lines`.
std::vector<int> write_jsonl(const std::string& path, const std::vector<Line>& lines) {
  std::ofstream out(path, std::ios::binary);
  std::vector<int> file_line;
  int n = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i == 3) { out << "\n"; ++n; }
    if (i == 9) { out << "   \t\n"; ++n; }
    out << lines[i].text << "\n";
    file_line.push_back(++n);
  }
  return file_line;
}

struct JobOutput {
  std::vector<nlohmann::json> rows;
  std::map<int64_t, glacier::io::ResultRecord> h5_rows;  // by input index (a duplicate id's error row repeats the id)
};

JobOutput run_job(const std::string& model, int np, const std::string& dir, const std::string& prompts) {
  const std::string jsonl = dir + "/out.jsonl", h5 = dir + "/out.h5";
  const auto run = run_glacier(np, "--model " + model + " --prompts " + prompts + " --jsonl " + jsonl + " --out " +
                                       h5 + " --max-tokens " + std::to_string(kMaxTokens) + " --ctx " +
                                       std::to_string(kCtx), kJobTimeLimitS);
  JobOutput o;
  EXPECT_EQ(run.exit_code, 0) << run.output;
  if (run.exit_code != 0) return o;
  o.rows = read_jsonl(jsonl);
  const auto finished = glacier::io::read_finished(h5);
  for (const auto& r : finished.rows)
    EXPECT_TRUE(o.h5_rows.emplace(r.index, r).second) << "HDF5 index " << r.index << " twice";
  EXPECT_EQ(finished.rows.size(), o.rows.size()) << "HDF5 and JSONL row counts";
  return o;
}

void expect_good_row(const nlohmann::json& row) {
  EXPECT_EQ(row["status"], "ok") << row.dump();
  EXPECT_EQ(row["tokens"].size(), size_t{kMaxTokens}) << row.dump();
  EXPECT_EQ(row["logprobs"].size(), size_t{kMaxTokens}) << row.dump();
  EXPECT_EQ(row["finish_reason"], "length") << row.dump();
  EXPECT_FALSE(row.contains("error")) << row.dump();
}

// The error row names the prompt file and line, and the problem.
void expect_bad_row(const nlohmann::json& row, const std::string& prompts, int line,
                    const std::vector<std::string>& problem) {
  EXPECT_EQ(row["status"], "error") << row.dump();
  EXPECT_EQ(row["finish_reason"], "error") << row.dump();
  EXPECT_TRUE(row["tokens"].empty()) << row.dump();
  ASSERT_TRUE(row.contains("error") && row["error"].is_string()) << row.dump();
  const std::string message = row["error"];
  EXPECT_NE(message.find(prompts + ":" + std::to_string(line) + ": "), std::string::npos)
      << "the message should name " << prompts << ":" << line << "; found: " << message;
  for (const std::string& word : problem)
    EXPECT_NE(message.find(word), std::string::npos) << "expected '" << word << "' in: " << message;
}

// The HDF5 file holds the same rows as the JSONL (whose line i is input index i): same ids, statuses,
// error messages and tokens.
void expect_h5_agrees(const JobOutput& o) {
  for (size_t i = 0; i < o.rows.size(); ++i) {
    const nlohmann::json& row = o.rows[i];
    const std::string id = row["id"];
    auto it = o.h5_rows.find(static_cast<int64_t>(i));
    if (it == o.h5_rows.end()) {
      ADD_FAILURE() << "JSONL row " << i << " (id " << id << ") is not in the HDF5 file";
      continue;
    }
    EXPECT_EQ(it->second.id, id) << "row " << i;
    EXPECT_EQ(it->second.status, row["status"]) << id;
    EXPECT_EQ(it->second.error, row.value("error", "")) << id;
    EXPECT_EQ(it->second.tokens, row["tokens"].get<std::vector<int32_t>>()) << id;
  }
}

class BadPrompts : public ::testing::TestWithParam<int> {};

TEST_P(BadPrompts, JsonlBadLinesBecomeErrorRowsAndGoodLinesRun) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const int np = GetParam();
  const std::string dir = glacier::testing::scratch_dir("badprompts-jsonl-np" + std::to_string(np));
  const std::string prompts = dir + "/prompts.jsonl";
  const std::vector<Line> lines = jsonl_lines();
  const std::vector<int> file_line = write_jsonl(prompts, lines);
  const JobOutput o = run_job(model, np, dir, prompts);
  ASSERT_EQ(o.rows.size(), lines.size()) << "one row per non-blank line";
  std::set<std::string> messages;
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE("input line " + std::to_string(file_line[i]) + ": " + lines[i].text.substr(0, 80));
    const nlohmann::json& row = o.rows[i];
    const std::string id = lines[i].id.empty() ? std::to_string(file_line[i]) : lines[i].id;
    EXPECT_EQ(row["id"], id) << "rows must keep the input order";
    if (lines[i].good) {
      expect_good_row(row);
    } else {
      expect_bad_row(row, prompts, file_line[i], lines[i].problem);
      EXPECT_TRUE(messages.insert(row.value("error", "")).second) << "two bad lines share one message";
    }
  }
  // The empty prompt is valid: BOS alone starts the generation.
  const auto empty = std::find_if(o.rows.begin(), o.rows.end(), [](const auto& r) { return r["id"] == "good-empty"; });
  ASSERT_NE(empty, o.rows.end());
  EXPECT_EQ((*empty)["prompt_tokens"], nlohmann::json::array({kBos}));
  expect_h5_agrees(o);
}

TEST_P(BadPrompts, TextFileBadUtf8LineBecomesErrorRow) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const int np = GetParam();
  const std::string dir = glacier::testing::scratch_dir("badprompts-txt-np" + std::to_string(np));
  const std::string prompts = dir + "/prompts.txt";
  {
    std::ofstream out(prompts, std::ios::binary);
    out << "Once upon a time\n"
        << "Tom \xC3\x28 went home\n"  // 0xC3 starts a two-byte sequence; '(' cannot continue it
        << "\n"
        << "The end of the day\n";
  }
  const JobOutput o = run_job(model, np, dir, prompts);
  ASSERT_EQ(o.rows.size(), 3u) << "one row per non-blank line";
  EXPECT_EQ(o.rows[0]["id"], "1");
  expect_good_row(o.rows[0]);
  EXPECT_EQ(o.rows[1]["id"], "2");
  expect_bad_row(o.rows[1], prompts, 2, {"UTF-8", "0xC3", "column 5"});
  EXPECT_EQ(o.rows[2]["id"], "4");
  expect_good_row(o.rows[2]);
  expect_h5_agrees(o);
}

INSTANTIATE_TEST_SUITE_P(Ranks, BadPrompts, ::testing::Values(1, 2),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

}  // namespace
