// The Python results module and the results schema on real jobs (stories260K): a generate job on 3
// ranks with a failing line, a score job and two perplexity jobs (F32 and Q4_0) are loaded with
// src/python/glacier_results.py and checked against docs/results-schema.md and their JSONL
// (tests/common/results_module_check.py), and the two perplexity runs compared as llama-perplexity's
// KL-divergence report compares them (tests/golden/data/perplexity); glacier_trace's Perfetto export of the 3-rank job names each
// rank's process and draws one arrow per forward hop, from a stage to the next.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <variant>

#include "common/h5py_check.h"
#include "common/job_runner.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"
#include "io/hdf5_trace.h"

namespace {

using glacier::testing::run_glacier;

constexpr int kJobTimeLimitS = 120;
constexpr int kRanks = 3;

struct Outputs {
  std::string h5, jsonl;
};

Outputs run_job(int np, const std::string& dir, const std::string& name, const std::string& args) {
  Outputs o{dir + "/" + name + ".h5", dir + "/" + name + ".jsonl"};
  const auto run = run_glacier(np, args + " --out " + o.h5 + " --jsonl " + o.jsonl, kJobTimeLimitS);
  EXPECT_EQ(run.exit_code, 0) << name << ": " << run.output;
  return o;
}

class ResultsModule : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = glacier::testing::shared_path("models/stories260K.gguf");
    q4_ = glacier::testing::shared_path("models/stories260K-q4_0.gguf");
    text_ = glacier::testing::shared_path("reference/stories260K/ppl_text.txt");
    if (model_.empty() || q4_.empty() || text_.empty())
      GTEST_SKIP() << "needs models/stories260K.gguf, models/stories260K-q4_0.gguf and reference/stories260K/ppl_text.txt "
                      "under GLACIER_SHARED_DIR (../shared): not found, skipped";
    dir_ = glacier::testing::scratch_dir("results-module");
    // 27 stories prompts, then a line that is not JSON: an error row between ok rows.
    std::ofstream prompts(dir_ + "/prompts.jsonl");
    prompts << glacier::testing::read_text(std::string(GLACIER_SOURCE_DIR) + "/tests/data/stories_prompts.jsonl")
            << "{\"id\": \"broken\", \"prompt\": \n"
            << R"({"id": "after", "prompt": "The cat", "max_tokens": 3})" << "\n";
    std::ofstream scores(dir_ + "/scores.jsonl");
    scores << R"({"id": "likely", "context": "Once upon a time", "continuation": ", there was a little girl"})" << "\n"
           << R"({"id": "unlikely", "context": "Once upon a time", "continuation": " the moon ate a green car"})" << "\n";
  }
  std::string model_, q4_, text_, dir_;
};

TEST_F(ResultsModule, LoadsEveryFileAsTheSchemaAndTheJsonlSay) {
  if (!glacier::testing::have_python_modules("h5py, pandas"))
    GTEST_SKIP() << "needs /usr/bin/python3 with h5py and pandas (env/install-deps.sh: python3-h5py python3-pandas)";
  const Outputs gen = run_job(kRanks, dir_, "generate", "--model " + model_ + " --prompts " + dir_ + "/prompts.jsonl --max-tokens 12");
  const Outputs score = run_job(1, dir_, "score", "--model " + model_ + " --prompts " + dir_ + "/scores.jsonl --mode score");
  const std::string ppl_args = " --prompts " + text_ + " --mode perplexity --ctx 128";
  const Outputs ppl = run_job(1, dir_, "ppl", "--model " + model_ + ppl_args);
  const Outputs ppl_q4 = run_job(1, dir_, "ppl-q4", "--model " + q4_ + ppl_args);
  if (HasFailure()) return;
  const auto check = glacier::testing::run_python_check(
      "results_module_check.py", {GLACIER_SOURCE_DIR, gen.h5, gen.jsonl, score.h5, score.jsonl, ppl.h5, ppl.jsonl, ppl_q4.h5,
       std::string(GLACIER_SOURCE_DIR) + "/tests/golden/data/perplexity/kld-stories260K-q4_0-vs-stories260K-c128.txt"});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_EQ(glacier::testing::summary_count(check, "generate_rows"), 29) << check.output;
  EXPECT_EQ(glacier::testing::summary_count(check, "errors"), 1) << check.output;
  EXPECT_EQ(glacier::testing::summary_count(check, "score_rows"), 2) << check.output;
}

TEST_F(ResultsModule, PerfettoExportNamesProcessesAndDrawsEachForwardHop) {
  const Outputs gen = run_job(kRanks, dir_, "trace", "--model " + model_ + " --prompts " + dir_ + "/prompts.jsonl --max-tokens 12");
  if (HasFailure()) return;
  const std::string json_path = dir_ + "/trace.json";
  const std::string cmd = std::string(GLACIER_BUILD_DIR) + "/glacier_trace " + gen.h5 + " --json " + json_path + " >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto events = glacier::testing::read_json(json_path)["traceEvents"];
  const auto attrs = glacier::io::read_root_attributes(gen.h5);
  const std::string host = std::get<std::string>(attrs.at("hosts")).substr(0, std::get<std::string>(attrs.at("hosts")).find(','));
  const double clock_error_us = glacier::io::read_trace_clock_error(gen.h5) * 1e6;

  std::map<int, std::string> names;
  std::map<int64_t, nlohmann::json> starts, finishes;
  for (const auto& e : events) {
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "s") starts[e["id"].get<int64_t>()] = e;
    if (e["ph"] == "f") finishes[e["id"].get<int64_t>()] = e;
  }
  ASSERT_EQ(names.size(), static_cast<size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r)  // one host here: every rank on it
    EXPECT_EQ(names[r], "replica 0 / stage " + std::to_string(r) + " @ " + host);

  // Every forward message (a send on stages 0 and 1) is one arrow from its stage to the next.
  size_t forward_sends = 0;
  for (const auto& row : glacier::io::read_trace(gen.h5))
    if (row.phase == glacier::io::TracePhase::Send && row.rank < kRanks - 1) ++forward_sends;
  ASSERT_GT(forward_sends, 0u);
  EXPECT_EQ(starts.size(), forward_sends);
  EXPECT_EQ(finishes.size(), forward_sends);
  for (const auto& [id, s] : starts) {
    ASSERT_TRUE(finishes.count(id)) << "flow " << id << " has no end";
    const auto& f = finishes.at(id);
    EXPECT_EQ(f["pid"].get<int>(), s["pid"].get<int>() + 1) << "flow " << id;
    EXPECT_EQ(f["name"], s["name"]) << "flow " << id;
    // The message arrives after it was sent, up to how far the ranks' clocks may disagree.
    EXPECT_GE(f["ts"].get<double>(), s["ts"].get<double>() - clock_error_us) << "flow " << id;
  }
}

}  // namespace
