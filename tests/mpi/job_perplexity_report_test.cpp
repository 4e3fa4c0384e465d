// A perplexity job's report on 1 and 3 ranks: stdout prints the running [k]ppl line, a chunk table and
// the final estimate with its +/-; the HDF5 file's /perplexity group, the `perplexity` attribute and the
// JSONL line hold the same figures beside the provenance; the figures do not depend on the rank count.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <variant>

#include "app/perplexity.h"
#include "common/job_runner.h"
#include "common/test_env.h"
#include "io/hdf5_perplexity.h"
#include "io/hdf5_results.h"

namespace {

using glacier::testing::run_glacier;

constexpr int kJobTimeLimitS = 120;

struct PerplexityJob {
  glacier::io::PerplexityTable table;
  nlohmann::json jsonl;
  std::string stdout_and_stderr;
};

PerplexityJob run_perplexity_job(int np, const std::string& model, const std::string& text) {
  const std::string dir = glacier::testing::scratch_dir("ppl-report-np" + std::to_string(np));
  const std::string out = dir + "/p.h5", jsonl = dir + "/p.jsonl";
  const auto run = run_glacier(np, "--model " + model + " --prompts " + text + " --mode perplexity --ctx 128 --out " + out +
                                       " --jsonl " + jsonl, kJobTimeLimitS);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  PerplexityJob job;
  job.stdout_and_stderr = run.output;
  if (run.exit_code != 0) return job;
  job.table = glacier::io::read_perplexity(out);
  const auto lines = glacier::testing::read_jsonl(jsonl);
  EXPECT_EQ(lines.size(), 1u);
  if (!lines.empty()) job.jsonl = lines[0];
  const auto attrs = glacier::io::read_root_attributes(out);
  for (const char* name : {"model_sha256", "mode", "command_line", "result_settings", "perplexity"})
    EXPECT_TRUE(attrs.count(name)) << "provenance attribute " << name << " missing";
  if (attrs.count("perplexity")) {
    EXPECT_EQ(nlohmann::json::parse(std::get<std::string>(attrs.at("perplexity"))), job.jsonl);
  }
  return job;
}

// The job's output without its log lines. mpiexec forwards a rank's stdout and stderr separately, so a
// log line (one write to stderr) can arrive in the middle of the report's running line on stdout.
std::string without_log_lines(const std::string& output) {
  static const std::regex kLogLine("(glacier|rank [0-9]+): [^\n]*\n");
  return std::regex_replace(output, kLogLine, "");
}

void expect_report_agrees(const PerplexityJob& job) {
  const auto& t = job.table;
  ASSERT_EQ(t.chunk_running_ppl.size(), 18u);  // 2397 tokens of text in 128-token chunks
  std::string running;
  double nll = 0;
  int64_t count = 0;
  for (size_t k = 0; k < t.chunk_running_ppl.size(); ++k) {
    running += glacier::app::format_running_ppl(static_cast<int32_t>(k) + 1, t.chunk_running_ppl[k]);
    // Each stored running value follows from the stored chunk sums; each chunk sum from its tokens.
    double chunk = 0;
    for (float v : t.token_nll[k]) chunk += v;
    EXPECT_DOUBLE_EQ(chunk, t.chunk_nll_sum[k]) << "chunk " << k;
    nll += t.chunk_nll_sum[k];
    count += t.chunk_n_scored[k];
    EXPECT_DOUBLE_EQ(std::exp(nll / static_cast<double>(count)), t.chunk_running_ppl[k]) << "chunk " << k;
    EXPECT_EQ(job.jsonl["chunks"][k]["nll_sum"].get<double>(), t.chunk_nll_sum[k]);
  }
  EXPECT_EQ(count, t.n_scored);
  const std::string report = without_log_lines(job.stdout_and_stderr);
  EXPECT_NE(report.find(running + "\n"), std::string::npos) << job.stdout_and_stderr;
  char final_line[96];
  std::snprintf(final_line, sizeof final_line, "Final estimate: PPL = %.4f +/- %.5f\n", t.ppl, t.ppl_stderr);
  EXPECT_NE(report.find(final_line), std::string::npos) << job.stdout_and_stderr;
  EXPECT_NE(report.find("chunk  n_scored       nll_sum  mean_nll  running_ppl\n"), std::string::npos);
  EXPECT_EQ(job.jsonl["ppl"].get<double>(), t.ppl);
  EXPECT_EQ(job.jsonl["ppl_stderr"].get<double>(), t.ppl_stderr);
  EXPECT_EQ(job.jsonl["nll_stderr"].get<double>(), t.nll_stderr);
}

TEST(JobPerplexityReport, StdoutFileAndJsonlAgreeOnOneAndThreeRanks) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  GLACIER_REQUIRE_SHARED(text, "reference/stories260K/ppl_text.txt");
  const PerplexityJob one = run_perplexity_job(1, model, text);
  const PerplexityJob three = run_perplexity_job(3, model, text);
  if (HasFailure()) return;
  expect_report_agrees(one);
  expect_report_agrees(three);
  // The engine's results do not depend on the split under --wire f32: every figure is bitwise the same.
  EXPECT_EQ(one.table.token_nll, three.table.token_nll);
  EXPECT_EQ(one.table.ppl_stderr, three.table.ppl_stderr);
}

}  // namespace
