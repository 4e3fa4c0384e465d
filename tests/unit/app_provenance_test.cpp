// The provenance record: every option glacier_mpi accepts appears in the options JSON (so a new option
// cannot be left out of the record), the result settings and how their differences are named, the
// command line as a shell would read it back, and the batch job's ids.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>
#include <string>

#include "app/options.h"
#include "app/provenance.h"

namespace glacier::app {
namespace {

// The long option names --help lists, read from its text as a user would.
std::set<std::string> options_in_help() {
  std::fflush(stdout);
  const std::string path = "/tmp/glacier-help-" + std::to_string(::getpid()) + ".txt";
  const int saved = ::dup(1);
  FILE* capture = std::fopen(path.c_str(), "w");
  ::dup2(::fileno(capture), 1);
  const char* argv[] = {"glacier_mpi", "--help"};
  parse_options(2, argv);
  std::fflush(stdout);
  ::dup2(saved, 1);
  ::close(saved);
  std::fclose(capture);
  std::FILE* in = std::fopen(path.c_str(), "r");
  std::string text;
  for (int c; (c = std::fgetc(in)) != EOF;) text.push_back(static_cast<char>(c));
  std::fclose(in);
  std::remove(path.c_str());
  std::set<std::string> names;
  const std::regex option(R"((?:^|\s|,)--([a-z][a-z0-9-]+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), option); it != std::sregex_iterator(); ++it)
    names.insert((*it)[1]);
  return names;
}

TEST(AppProvenance, EveryOptionOfTheHelpIsInTheOptionsRecord) {
  const std::set<std::string> names = options_in_help();
  ASSERT_GT(names.size(), 30u) << "--help lists fewer options than the job has: the parse of its text broke";
  const nlohmann::json record = options_json(JobOptions{});
  for (const std::string& name : names) {
    if (name == "help" || name == "version") continue;  // they end the program before a job exists
    EXPECT_TRUE(record.contains(name)) << "--" << name << " is missing from options_json()";
  }
}

TEST(AppProvenance, SettingDifferencesNameEveryChangedKey) {
  JobOptions a;
  const nlohmann::json then = result_settings(a, 2048, std::nullopt, "0:3,3:5");
  EXPECT_FALSE(then.contains("layer_split")) << "with --wire f32 the split does not change results";
  EXPECT_FALSE(setting_differences(then, then).has_value());
  JobOptions b = a;
  b.wire = glacier::pipeline::WireCodec::BF16;
  b.seed = 7;
  const nlohmann::json now = result_settings(b, 4096, std::string("chatml"), "0:3,3:5");
  const std::string diff = setting_differences(then, now).value_or("");
  for (const char* part : {"wire: \"f32\" in the file, \"bf16\" now", "seed: 0 in the file, 7 now",
                           "ctx: 2048 in the file, 4096 now", "chat_template: null in the file, \"chatml\" now",
                           "layer_split: (absent) in the file, \"0:3,3:5\" now"})
    EXPECT_NE(diff.find(part), std::string::npos) << part << " in: " << diff;
}

TEST(AppProvenance, CommandLineQuotesWhatTheShellWouldSplit) {
  EXPECT_EQ(shell_command_line({"glacier_mpi", "--model", "/m/a.gguf", "--stop", "The End", "--stop", "it's", ""}),
            "glacier_mpi --model /m/a.gguf --stop 'The End' --stop 'it'\\''s' ''");
}

TEST(AppProvenance, BatchJobIdsComeFromSlurmsEnvironment) {
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_ARRAY_JOB_ID");
  ::unsetenv("SLURM_ARRAY_TASK_ID");
  EXPECT_TRUE(batch_job_json().empty());
  ::setenv("SLURM_JOB_ID", "4242", 1);
  ::setenv("SLURM_ARRAY_TASK_ID", "3", 1);
  const nlohmann::json j = batch_job_json();
  EXPECT_EQ(j["system"], "slurm");
  EXPECT_EQ(j["job_id"], "4242");
  EXPECT_EQ(j["array_task_id"], "3");
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_ARRAY_TASK_ID");
}

TEST(AppProvenance, UtcTimestampIsIso8601) {
  EXPECT_TRUE(std::regex_match(utc_timestamp(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) << utc_timestamp();
}

}  // namespace
}  // namespace glacier::app
