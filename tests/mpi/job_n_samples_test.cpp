// n samples per prompt in whole jobs on stories260K: sample 0 of n = 8 is the n = 1 row bit for bit; every
// sample is the same at 1 and 3 ranks, 2 replicas, another --ubatch and --n-prefill each; samples differ at
// temperature 1; the prompt is prefilled once; --resume keeps whole prompts; n is refused where it cannot run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/h5py_check.h"
#include "common/job_runner.h"
#include "common/test_env.h"

namespace {

using glacier::testing::read_jsonl;
using glacier::testing::run_glacier;
using nlohmann::json;

constexpr int kJobTimeLimitS = 90;  // seconds of work at most; the limit only stops a hung job
constexpr int kSamples = 8;
const std::string kPrompt = "Once upon a time there was a little girl named Lily. She liked to play outside";

// One sample's output, log-probs as float bits (compared bit for bit).
struct Sample {
  std::vector<int> tokens;
  std::vector<uint32_t> logprob_bits;
  bool operator==(const Sample&) const = default;
};

void write_lines(const std::string& path, const std::vector<json>& lines) {
  std::ofstream out(path);
  for (const json& l : lines) out << l.dump() << "\n";
}

// Rows of a JSONL result by (id, sample), in file order; checks the rows come in input then sample order.
std::vector<std::pair<std::string, Sample>> read_samples(const std::string& path) {
  std::vector<std::pair<std::string, Sample>> out;
  std::map<std::string, int64_t> next_sample;
  for (const json& row : read_jsonl(path)) {
    const std::string id = row["id"].get<std::string>();
    EXPECT_EQ(row["status"], "ok") << row.dump();
    EXPECT_EQ(row["sample"].get<int64_t>(), next_sample[id]++) << "rows of " << id << " out of sample order";
    Sample s;
    s.tokens = row["tokens"].get<std::vector<int>>();
    for (const json& lp : row["logprobs"]) {
      const float f = lp.get<float>();
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      s.logprob_bits.push_back(bits);
    }
    out.emplace_back(id, std::move(s));
  }
  return out;
}

json line(const std::string& id, int n) {
  return {{"id", id}, {"prompt", kPrompt}, {"n", n}, {"temperature", 1.0}, {"top_p", 0.95}, {"seed", 5},
          {"max_tokens", 24}, {"repetition_penalty", 1.1}, {"logit_bias", {{"13", -2.5}}}};
}

struct Job {
  std::string out;
  std::string log;
};

Job run(const std::string& model, const std::string& name, int np, const std::vector<json>& lines,
        const std::string& extra = "") {
  const std::string dir = glacier::testing::scratch_dir("nsamples-" + name);
  write_lines(dir + "/p.jsonl", lines);
  const auto r = run_glacier(np, "--model " + model + " --prompts " + dir + "/p.jsonl --jsonl " + dir + "/r.jsonl " + extra,
                             kJobTimeLimitS);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return {dir + "/r.jsonl", r.output};
}

// The job's "prefill: N prompt tokens computed" figure (-1 when missing).
int64_t prefilled(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("prefill: (\\d+) prompt tokens computed"))) return -1;
  return std::stoll(m[1]);
}

TEST(JobNSamples, SampleZeroIsTheSingleSampleRow) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const auto many = read_samples(run(model, "zero-n8", 1, {line("p", kSamples)}).out);
  const auto one = read_samples(run(model, "zero-n1", 1, {line("p", 1)}).out);
  ASSERT_EQ(many.size(), static_cast<size_t>(kSamples));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(many[0].second, one[0].second);
}

TEST(JobNSamples, SamplesAreTheSameAtAnyRanksMicroBatchAndWithoutSharing) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  // Two prompts, so samples of both share the micro-batches and the ring.
  const std::vector<json> lines = {line("p", kSamples), line("q", 3)};
  const auto base = read_samples(run(model, "np1", 1, lines).out);
  ASSERT_EQ(base.size(), static_cast<size_t>(kSamples + 3));
  EXPECT_EQ(read_samples(run(model, "np3", 3, lines, "--ubatch 3").out), base);
  EXPECT_EQ(read_samples(run(model, "each", 1, lines, "--n-prefill each --ubatch 5").out), base);
  // Two replicas: a prompt's rows travel to rank 0 together (one result message a prompt).
  EXPECT_EQ(read_samples(run(model, "replicas", 2, lines, "--replicas 2").out), base);
  // At temperature 1 the eight streams do not all draw the same continuation.
  std::set<std::vector<int>> distinct;
  for (int j = 0; j < kSamples; ++j) distinct.insert(base[static_cast<size_t>(j)].second.tokens);
  EXPECT_GT(distinct.size(), 1u);
}

TEST(JobNSamples, ThePromptIsPrefilledOnce) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const Job once = run(model, "count-once", 1, {line("p", kSamples)});
  const Job each = run(model, "count-each", 1, {line("p", kSamples)}, "--n-prefill each");
  const auto rows = read_jsonl(once.out);
  ASSERT_EQ(rows.size(), static_cast<size_t>(kSamples));
  const auto prompt_tokens = static_cast<int64_t>(rows[0]["prompt_tokens"].size());
  EXPECT_EQ(prefilled(once.log), prompt_tokens) << once.log;
  EXPECT_EQ(prefilled(each.log), kSamples * prompt_tokens) << each.log;
}

TEST(JobNSamples, OptionNAppliesToLinesWithoutN) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  json plain = line("p", 1);
  plain.erase("n");
  const auto rows = read_samples(run(model, "option", 1, {plain, line("q", 2)}, "--n 3").out);
  std::map<std::string, int> per_id;
  for (const auto& [id, s] : rows) per_id[id]++;
  EXPECT_EQ(per_id, (std::map<std::string, int>{{"p", 3}, {"q", 2}}));
}

TEST(JobNSamples, ResumeKeepsEveryFinishedSample) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("nsamples-resume");
  write_lines(dir + "/p.jsonl", {line("p", 4), line("q", 2)});
  const std::string args = "--model " + model + " --prompts " + dir + "/p.jsonl --out " + dir + "/r.h5 --jsonl " + dir + "/r.jsonl";
  const auto first = run_glacier(1, args, kJobTimeLimitS);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto rows = read_samples(dir + "/r.jsonl");
  const auto again = run_glacier(1, args + " --resume", kJobTimeLimitS);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  // Both prompts were finished with all their samples: nothing runs again, and the JSONL is rebuilt
  // from the HDF5 rows (their sample column) exactly.
  EXPECT_NE(again.output.find("0 finished, 0 left, 2 earlier"), std::string::npos) << again.output;
  EXPECT_EQ(read_samples(dir + "/r.jsonl"), rows);

  // A file that lost its last row (a flush cut short) holds a prompt with a sample missing: that prompt
  // runs again whole, the other is kept, and the rows come out the same.
  if (!glacier::testing::have_h5py()) GTEST_SKIP() << "/usr/bin/python3 with h5py not found: the cut-file case is skipped";
  const std::string cut = "/usr/bin/python3 -c \"import h5py,sys; r=h5py.File(sys.argv[1],'r+')['results']; "
                          "[r[c].resize((r[c].shape[0]-1,)) for c in r]\" " + dir + "/r.h5";
  ASSERT_EQ(std::system(cut.c_str()), 0) << cut;
  const auto third = run_glacier(1, args + " --resume", kJobTimeLimitS);
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_NE(third.output.find("1 finished, 0 left, 1 earlier"), std::string::npos) << third.output;
  EXPECT_EQ(read_samples(dir + "/r.jsonl"), rows);
}

TEST(JobNSamples, RefusesNWhereItCannotRun) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("nsamples-refuse");
  // More samples than KV slots fails that prompt (one error row a sample); a bad n fails its line.
  write_lines(dir + "/p.jsonl", {line("ok", 2), line("big", 5), line("zero", 0)});
  const auto r = run_glacier(1, "--model " + model + " --prompts " + dir + "/p.jsonl --jsonl " + dir + "/r.jsonl --slots 4",
                             kJobTimeLimitS);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, std::vector<json>> by_id;
  for (const json& row : read_jsonl(dir + "/r.jsonl")) by_id[row["id"].get<std::string>()].push_back(row);
  ASSERT_EQ(by_id["ok"].size(), 2u);
  EXPECT_EQ(by_id["ok"][1]["status"], "ok");
  ASSERT_EQ(by_id["big"].size(), 5u);
  for (const json& row : by_id["big"]) {
    EXPECT_EQ(row["status"], "error");
    const std::string error = row["error"].get<std::string>();
    EXPECT_NE(error.find("p.jsonl:2: n of 5 samples: expected 1..4"), std::string::npos) << error;
  }
  ASSERT_EQ(by_id["zero"].size(), 1u);
  EXPECT_NE(by_id["zero"][0]["error"].get<std::string>().find("p.jsonl:3: \"n\": expected an integer in 1..128"),
            std::string::npos)
      << by_id["zero"][0].dump();

  // Score mode, and OpenAI batch lines (their output has one choice for now), refuse --n above 1.
  const auto score = run_glacier(1, "--model " + model + " --prompts " + dir + "/p.jsonl --jsonl " + dir +
                                        "/s.jsonl --mode score --n 2", kJobTimeLimitS);
  EXPECT_EQ(score.exit_code, 2) << score.output;
  EXPECT_NE(score.output.find("option --n: expected 1 with --mode score"), std::string::npos) << score.output;
  write_lines(dir + "/b.jsonl", {{{"custom_id", "c1"}, {"method", "POST"}, {"url", "/v1/completions"},
                                  {"body", {{"prompt", kPrompt}, {"max_tokens", 4}}}}});
  const auto batch = run_glacier(1, "--model " + model + " --prompts " + dir + "/b.jsonl --jsonl " + dir + "/b_out.jsonl --n 2",
                                 kJobTimeLimitS);
  EXPECT_EQ(batch.exit_code, 2) << batch.output;
  EXPECT_NE(batch.output.find("option --n: expected 1 for a prompt file of OpenAI batch lines"), std::string::npos)
      << batch.output;
  // A body's "n" gives its one output line n choices, each the sample a plain line with that n draws.
  write_lines(dir + "/b2.jsonl", {{{"custom_id", "c1"}, {"method", "POST"}, {"url", "/v1/completions"},
                                   {"body", {{"prompt", kPrompt}, {"max_tokens", 4}, {"n", 3}, {"temperature", 1.0},
                                             {"seed", 5}}}}});
  const auto body = run_glacier(1, "--model " + model + " --prompts " + dir + "/b2.jsonl --jsonl " + dir + "/b2_out.jsonl",
                                kJobTimeLimitS);
  EXPECT_EQ(body.exit_code, 0) << body.output;
  const auto out = read_jsonl(dir + "/b2_out.jsonl");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0]["error"].is_null()) << out[0].dump();
  const auto& response = out[0]["response"]["body"];
  ASSERT_EQ(response["choices"].size(), 3u) << out[0].dump();
  // The same request as a plain line (its id the custom_id): one row per sample, the same texts in order.
  write_lines(dir + "/p3.jsonl", {{{"id", "c1"}, {"prompt", kPrompt}, {"max_tokens", 4}, {"n", 3}, {"temperature", 1.0},
                                   {"seed", 5}}});
  const auto plain = run_glacier(1, "--model " + model + " --prompts " + dir + "/p3.jsonl --jsonl " + dir + "/p3_out.jsonl",
                                 kJobTimeLimitS);
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  const auto rows = read_jsonl(dir + "/p3_out.jsonl");
  ASSERT_EQ(rows.size(), 3u);
  int64_t completion_tokens = 0;
  std::set<std::string> texts;
  for (size_t j = 0; j < 3; ++j) {
    const auto& choice = response["choices"][j];
    EXPECT_EQ(choice["index"], j);
    EXPECT_EQ(choice["text"], rows[j]["text"]) << "sample " << j;
    EXPECT_EQ(choice["finish_reason"], rows[j]["finish_reason"]) << "sample " << j;
    texts.insert(choice["text"].get<std::string>());
    completion_tokens += static_cast<int64_t>(rows[j]["tokens"].size());
  }
  EXPECT_GT(texts.size(), 1u) << "three samples at temperature 1 all drew the same text: " << out[0].dump();
  EXPECT_EQ(response["usage"]["completion_tokens"].get<int64_t>(), completion_tokens);
  EXPECT_EQ(response["usage"]["total_tokens"].get<int64_t>(),
            response["usage"]["prompt_tokens"].get<int64_t>() + response["usage"]["completion_tokens"].get<int64_t>());
}

}  // namespace
