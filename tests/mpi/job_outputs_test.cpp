// Outputs that cannot harm inputs or each other, at job level: an --out or --jsonl naming an input is
// refused with the input untouched; a second job on a running job's --out is refused naming the
// holder, and the first job's file stays whole; --resume after prompts moved in a .txt file (ids are
// line numbers) runs every moved prompt again and gives exactly a fresh run's rows, one per prompt.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "common/job_runner.h"
#include "common/process.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"

namespace {

namespace fs = std::filesystem;
using glacier::testing::read_text;
using glacier::testing::run_glacier;

constexpr int kExitInputError = 2;  // src/app/job.h
// A refusal comes before any prompt runs: seconds, so a hang is cut short.
constexpr int kRefusalTimeLimitS = 30;
// Only stops a hung job: the long job below takes about 10 s in a release build, 5-10 times that under
// the sanitizers, and more again on a busy host (it once ran past 120 s there).
constexpr int kJobTimeLimitS = 600;
// Long enough that the first job is still running when the second one starts (about 10 s here).
constexpr int kLongJobPrompts = 300;
constexpr int kLongJobTokens = 200;
constexpr double kLockWaitS = 60.0;

// The file's text, or "" while it does not exist yet.
std::string text_if_any(const std::string& path) { return fs::exists(path) ? read_text(path) : std::string(); }

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const auto& l : lines) out << l << "\n";
}

TEST(JobOutputs, AnOutputNamingAnInputIsRefusedAndTheInputKept) {
  GLACIER_REQUIRE_SHARED(shared_model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("outputs-inputs");
  const std::string model = dir + "/m.gguf", prompts = dir + "/p.txt";
  fs::copy_file(shared_model, model, fs::copy_options::overwrite_existing);
  write_lines(prompts, {"Once upon a time", "Lily and Tom"});
  fs::remove(dir + "/alias.jsonl");
  fs::create_symlink(prompts, dir + "/alias.jsonl");
  const std::string model_before = read_text(model), prompts_before = read_text(prompts);
  struct Case {
    std::string outputs, output_option, input_option;
  };
  const Case cases[] = {
      {"--out " + model, "--out", "--model"},
      {"--jsonl " + prompts, "--jsonl", "--prompts"},
      {"--out " + dir + "/r.h5 --jsonl " + dir + "/alias.jsonl", "--jsonl", "--prompts"},
  };
  for (const Case& c : cases) {
    const auto run = run_glacier(2, "--model " + model + " --prompts " + prompts + " --max-tokens 4 " + c.outputs,
                                 kRefusalTimeLimitS);
    EXPECT_EQ(run.exit_code, kExitInputError) << c.outputs << "\n" << run.output;
    EXPECT_NE(run.output.find(c.output_option + ": expected an output file apart from every input"), std::string::npos)
        << run.output;
    EXPECT_NE(run.output.find(c.input_option), std::string::npos) << run.output;
    EXPECT_TRUE(read_text(model) == model_before) << c.outputs << " changed the model";
    EXPECT_TRUE(read_text(prompts) == prompts_before) << c.outputs << " changed the prompts";
  }
  EXPECT_FALSE(fs::exists(dir + "/r.h5")) << "a refused job wrote its other output";
}

TEST(JobOutputs, ASecondJobOnARunningJobsOutputIsRefusedAndTheFirstFileStaysWhole) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("outputs-lock");
  const std::string prompts = dir + "/long.txt", out = dir + "/r.h5", lock = out + ".lock";
  std::vector<std::string> lines;
  for (int i = 0; i < kLongJobPrompts; ++i) lines.push_back("Once upon a time there was number " + std::to_string(i));
  write_lines(prompts, lines);
  write_lines(dir + "/short.txt", {"The cat"});
  fs::remove(out);
  glacier::testing::BackgroundProcess first(
      glacier::testing::glacier_argv(1, "--model " + model + " --prompts " + prompts + " --out " + out +
                                            " --max-tokens " + std::to_string(kLongJobTokens)),
      dir + "/first.log");
  // The lock file appears before the results file is created, and holds the holder's pid.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kLockWaitS);
  while (std::chrono::steady_clock::now() < deadline && first.running() &&
         text_if_any(lock).find("pid") == std::string::npos)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(first.running()) << "the first job ended before the second could start\n" << first.output();
  ASSERT_NE(text_if_any(lock).find("pid"), std::string::npos) << "no lock file " << lock;

  const auto second = run_glacier(2, "--model " + model + " --prompts " + dir + "/short.txt --out " + out +
                                         " --max-tokens 4", kRefusalTimeLimitS);
  EXPECT_EQ(second.exit_code, kExitInputError) << second.output;
  EXPECT_NE(second.output.find("expected no other job writing it, found it locked by host"), std::string::npos)
      << second.output;
  EXPECT_NE(second.output.find(lock), std::string::npos) << second.output;
  EXPECT_TRUE(first.running()) << "the first job should still run: this test's timing is too short\n"
                               << first.output();

  const auto code = first.wait_for(kJobTimeLimitS);
  ASSERT_TRUE(code.has_value()) << "the first job did not finish\n" << first.output();
  EXPECT_EQ(*code, 0) << first.output();
  const auto finished = glacier::io::read_finished(out);
  EXPECT_EQ(finished.rows.size(), size_t{kLongJobPrompts});
  EXPECT_NE(finished.attributes.find("finished_at"), finished.attributes.end());
  EXPECT_FALSE(fs::exists(lock)) << "the finished job should remove its lock file";
}

// ids of a .txt file are line numbers: a line inserted at the top moves every prompt to a new id and
// index, so no row of the first run may be kept.
TEST(JobOutputs, ResumeAfterPromptsMovedRunsThemAgainAndMatchesAFreshRun) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("outputs-shifted");
  const std::string prompts = dir + "/p.txt";
  const std::vector<std::string> original = {"Once upon a time", "Lily and Tom went to the park", "The cat sat",
                                             "Ben had a red ball"};
  std::vector<std::string> shifted = original;
  shifted.insert(shifted.begin(), "A dog ran fast");
  shifted.push_back("Once upon a time");  // the first prompt's text again, at another line
  auto args = [&](const std::string& name) {
    return "--model " + model + " --prompts " + prompts + " --out " + dir + "/" + name + ".h5 --jsonl " + dir + "/" +
           name + ".jsonl --max-tokens 12";
  };
  write_lines(prompts, original);
  const auto first = run_glacier(2, args("run"), kJobTimeLimitS);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  write_lines(prompts, shifted);
  const auto resumed = run_glacier(2, args("run") + " --resume", kJobTimeLimitS);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("whose prompt line or sampling changed"), std::string::npos) << resumed.output;
  const auto fresh = run_glacier(2, args("fresh"), kJobTimeLimitS);
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;

  EXPECT_EQ(glacier::testing::read_jsonl(dir + "/run.jsonl"), glacier::testing::read_jsonl(dir + "/fresh.jsonl"));
  const auto rows = glacier::io::read_finished(dir + "/run.h5").rows;
  ASSERT_EQ(rows.size(), shifted.size()) << "one row per prompt";
  std::set<int64_t> indices;
  for (const auto& row : rows) EXPECT_TRUE(indices.insert(row.index).second) << "two rows for index " << row.index;
  const auto fresh_rows = glacier::io::read_finished(dir + "/fresh.h5").rows;
  for (const auto& row : rows) {
    auto it = std::find_if(fresh_rows.begin(), fresh_rows.end(), [&](const auto& f) { return f.index == row.index; });
    ASSERT_NE(it, fresh_rows.end());
    EXPECT_EQ(row.id, it->id);
    EXPECT_EQ(row.tokens, it->tokens) << "index " << row.index;
    EXPECT_EQ(row.prompt_digest, it->prompt_digest) << "index " << row.index;
  }
}

// A perplexity run given an earlier generate run's --out replaces the file: its trace and figures never
// sit beside another run's result rows.
TEST(JobOutputs, PerplexityReplacesAnEarlierResultsFileInsteadOfAddingToIt) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  GLACIER_REQUIRE_SHARED(text, "reference/stories260K/ppl_text.txt");
  const std::string dir = glacier::testing::scratch_dir("outputs-ppl");
  write_lines(dir + "/p.txt", {"Once upon a time", "The cat"});
  const std::string out = dir + "/r.h5";
  const auto generate = run_glacier(2, "--model " + model + " --prompts " + dir + "/p.txt --out " + out + " --max-tokens 4",
                                    kJobTimeLimitS);
  ASSERT_EQ(generate.exit_code, 0) << generate.output;
  ASSERT_EQ(glacier::io::read_finished(out).rows.size(), 2u);
  const auto ppl = run_glacier(2, "--model " + model + " --prompts " + text + " --out " + out +
                                      " --mode perplexity --ctx 128", kJobTimeLimitS);
  ASSERT_EQ(ppl.exit_code, 0) << ppl.output;
  const auto after = glacier::io::read_finished(out);
  EXPECT_TRUE(after.rows.empty()) << "the generate run's rows are still in the perplexity run's file";
  ASSERT_NE(after.attributes.find("perplexity"), after.attributes.end());
  const auto figures = nlohmann::json::parse(std::get<std::string>(after.attributes.at("perplexity")));
  EXPECT_EQ(figures["n_chunk"], 18);
  EXPECT_EQ(std::get<std::string>(after.attributes.at("mode")), "perplexity");
}

}  // namespace
