// Job-level stops and stalls under mpiexec: a rank stopped (SIGSTOP) while loading ends the job through
// the start-up watchdog, named with its phase, while a slow but live load does not; a stop signal to
// the launcher (through jobs/glacier_run.sh, the documented recipe) or to any one rank drains the job,
// exits 75 with a summary of finished, failed and left prompts, and --resume finishes it with the
// uninterrupted run's results.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <ostream>
#include <regex>
#include <thread>

#include "common/job_runner.h"
#include "common/process.h"
#include "common/test_env.h"
#include "util/clock.h"

namespace {

using glacier::testing::BackgroundProcess;
using glacier::testing::read_text;
using glacier::testing::run_glacier;

constexpr int kRanks = 2;
constexpr int kExitInterrupted = 75;  // src/app/job.h
constexpr int kJobTimeLimitS = 90;
// The start-up tests' --stall-timeout, and how much later than it the job must have ended: the
// watchdog's 10 ms service interval, rank 0's half second to deliver its verdict, then MPI_Abort and
// mpiexec killing every rank (about a second here).
constexpr int kStartupStallTimeoutS = 3;
constexpr double kStallEndSlackS = 5.0;
// How long the slowed rank's load of the test model should last: long enough that a stop 0.5 s in lands
// inside it and that a live slow load spans several 1 s stall timeouts. A fixed --slow-rank factor does
// not give that everywhere (100 made 3.5 s on the first machine, 1.7 s on a quiet Zen 5 VM and 0.55 s on
// a Zen 3 VM), so the factor is set from the load's plain length on the machine (slow_rank_factor).
constexpr double kSlowLoadSeconds = 4.0;
constexpr double kMinSlowLoadFactor = 100.0;  // slow machines and sanitizer builds: as before
// After the loading phase starts: time for a progress report, so the verdict can quote one.
constexpr double kIntoLoadingS = 0.5;
constexpr double kPhaseWaitS = 60.0;
constexpr int kLiveLoadStallTimeoutS = 1;
constexpr double kMaxSlowRankFactor = 1000.0;  // --slow-rank's bound (app/options.cpp)

// A synthetic f32 model of 87 MiB (8 layers, 768 wide): big enough that a slowed load takes seconds,
// made in about a second.
std::string make_model(const std::string& dir) {
  const std::string path = dir + "/model.gguf";
  const auto made = glacier::testing::run_shell(std::string(GLACIER_BUILD_DIR) +
                                                "/glacier_mkmodel --preset tiny --n-embd 768 --n-layer 8 --n-head 12 "
                                                "--n-head-kv 12 --type f32 --out " + path);
  EXPECT_EQ(made.exit_code, 0) << made.output;
  return path;
}

std::string one_prompt(const std::string& dir) {
  const std::string path = dir + "/one.jsonl";
  std::ofstream(path) << R"({"id": "a", "prompt": "Once upon a time"})" << "\n";
  return path;
}

// A one-prompt, one-token job of kRanks ranks with debug logging and `options`, started in the background:
// its JSONL dir/<name>.jsonl, its output dir/<name>.log.
BackgroundProcess start_one_token_job(const std::string& dir, const std::string& model, const std::string& name,
                                      const std::string& options) {
  const std::string args = "--model " + model + " --prompts " + one_prompt(dir) + " --jsonl " + dir + "/" + name +
                           ".jsonl --max-tokens 1 --log-level debug" + options;
  return BackgroundProcess(glacier::testing::glacier_argv(kRanks, args), dir + "/" + name + ".log");
}

// Waits until the job's output holds `text`; the seconds it took, or a negative value when the job
// ended first or the wait timed out.
double wait_for_output(BackgroundProcess& job, const std::string& text) {
  const double t0 = glacier::now_seconds();
  while (glacier::now_seconds() - t0 < kPhaseWaitS) {
    if (job.output().find(text) != std::string::npos) return glacier::now_seconds() - t0;
    if (!job.running()) return -1.0;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return -1.0;
}

std::string loading_line(int rank) {
  std::string line = "rank ";  // built with += (GCC 12 warns falsely on "..." + std::to_string(...))
  line += std::to_string(rank);
  line += ": debug: start-up phase: loading layers";
  return line;
}

// The --slow-rank factor that makes rank 1's load of `model` last about kSlowLoadSeconds here: its plain
// load is timed once per test program (a run without --slow-rank), and the factor kept within
// [kMinSlowLoadFactor, --slow-rank's bound].
std::string slow_rank_factor(const std::string& dir, const std::string& model) {
  static double plain_load_s = -1.0;
  if (plain_load_s < 0.0) {
    BackgroundProcess job = start_one_token_job(dir, model, "plain", " --ctx 256");
    const bool started = wait_for_output(job, loading_line(1)) >= 0.0;
    const double load_s = started ? wait_for_output(job, "rank 1: debug: start-up phase: allocating the KV cache") : -1.0;
    const auto code = job.wait_for(kJobTimeLimitS);
    EXPECT_TRUE(code.has_value() && *code == 0 && load_s >= 0.0) << "the plain run\n" << job.output();
    plain_load_s = std::max(load_s, 1e-3);
    std::printf("the test model's plain load took %.3f s\n", plain_load_s);
  }
  const double factor = std::clamp(std::ceil(kSlowLoadSeconds / plain_load_s), kMinSlowLoadFactor, kMaxSlowRankFactor);
  return std::to_string(static_cast<int>(factor));
}

class StartupStall : public ::testing::TestWithParam<int> {};

TEST_P(StartupStall, RankStoppedWhileLoadingEndsTheJobNamingRankAndPhase) {
  const int stopped = GetParam();
  const std::string dir = glacier::testing::scratch_dir("startup-stall-rank" + std::to_string(stopped));
  const std::string model = make_model(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  BackgroundProcess job = start_one_token_job(dir, model, "job",
                                              " --stall-timeout " + std::to_string(kStartupStallTimeoutS) + " --slow-rank " +
                                                  std::to_string(stopped) + ":" + slow_rank_factor(dir, model));
  ASSERT_GE(wait_for_output(job, loading_line(stopped)), 0.0) << "rank " << stopped << " never started loading\n"
                                                               << job.output();
  std::this_thread::sleep_for(std::chrono::duration<double>(kIntoLoadingS));
  const auto target = glacier::testing::pid_of_mpi_rank(job.pid(), stopped);
  ASSERT_TRUE(target.has_value()) << job.output();
  const std::vector<pid_t> processes = glacier::testing::descendants_of(job.pid());
  const double t0 = glacier::now_seconds();
  ASSERT_EQ(::kill(*target, SIGSTOP), 0);
  const auto code = job.wait_for(kStartupStallTimeoutS + 2 * kStallEndSlackS);
  const double took = glacier::now_seconds() - t0;
  const std::string output = job.output();
  job.kill_tree();
  EXPECT_TRUE(glacier::testing::kill_and_wait_gone(processes, 10.0)) << "a rank outlived the job";
  ASSERT_TRUE(code.has_value()) << "the job still ran " << took << " s after rank " << stopped << " stopped\n"
                                << output;
  std::printf("rank %d stopped while loading: the job ended in %.1f s (--stall-timeout %d)\n", stopped, took,
              kStartupStallTimeoutS);
  EXPECT_NE(*code, 0) << output;
  EXPECT_LT(took, kStartupStallTimeoutS + kStallEndSlackS) << output;
  std::string named = "rank ";
  named += std::to_string(stopped);
  named += " (";
  EXPECT_NE(output.find("start-up watchdog"), std::string::npos) << output;
  EXPECT_NE(output.find(named), std::string::npos) << "the stopped rank should be named\n" << output;
  EXPECT_NE(output.find("in start-up phase 'loading layers"), std::string::npos) << "and its phase\n" << output;
  EXPECT_NE(output.find("MiB checked"), std::string::npos) << "with its last progress report\n" << output;
  if (stopped == 0) {
    EXPECT_NE(output.find("rank 0 is stopped or hung"), std::string::npos) << output;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, StartupStall, ::testing::Values(0, 1),
                         [](const auto& info) { return "rank" + std::to_string(info.param); });

// A stop signal while a rank loads ends the job after the load step, on every rank with 75, instead of
// waiting for the ring to start: nothing has run, so nothing is lost.
TEST(StartupStop, SigtermToARankWhileLoadingEndsTheJobWith75AfterTheStep) {
  const std::string dir = glacier::testing::scratch_dir("startup-stop");
  const std::string model = make_model(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  BackgroundProcess job = start_one_token_job(dir, model, "job", " --slow-rank 1:" + slow_rank_factor(dir, model));
  ASSERT_GE(wait_for_output(job, loading_line(1)), 0.0) << job.output();
  const auto target = glacier::testing::pid_of_mpi_rank(job.pid(), 1);
  ASSERT_TRUE(target.has_value()) << job.output();
  ASSERT_EQ(::kill(*target, SIGTERM), 0);
  const auto code = job.wait_for(kJobTimeLimitS);
  const std::string output = job.output();
  ASSERT_TRUE(code.has_value()) << output;
  EXPECT_EQ(*code, kExitInterrupted) << output;
  EXPECT_NE(output.find("SIGTERM to rank 1 during start-up, before any prompt ran"), std::string::npos) << output;
  EXPECT_EQ(output.find("start-up phase: allocating the KV cache"), std::string::npos)
      << "the job went on past the step the signal came in\n" << output;
}

// The same slowed load with a stall timeout far below its length: progress reports keep it alive.
TEST(StartupWatchdog, SlowLoadThatReportsProgressIsNotAStall) {
  const std::string dir = glacier::testing::scratch_dir("startup-slow-load");
  const std::string model = make_model(dir);
  ASSERT_FALSE(::testing::Test::HasFailure());
  BackgroundProcess job = start_one_token_job(dir, model, "job",
                                              " --stall-timeout " + std::to_string(kLiveLoadStallTimeoutS) +
                                                  " --slow-rank 1:" + slow_rank_factor(dir, model) +
                                                  // A short context: the other phases (the KV cache of 2048
                                                  // positions took over the second in a sanitizer build on a
                                                  // busy machine) stay well inside the timeout.
                                                  " --ctx 256");
  ASSERT_GE(wait_for_output(job, loading_line(1)), 0.0) << job.output();
  const double load_s = wait_for_output(job, "rank 1: debug: start-up phase: allocating the KV cache");
  ASSERT_GE(load_s, 0.0) << job.output();
  const auto code = job.wait_for(kJobTimeLimitS);
  ASSERT_TRUE(code.has_value()) << job.output();
  std::printf("rank 1 loaded for %.1f s under --stall-timeout %d\n", load_s, kLiveLoadStallTimeoutS);
  EXPECT_GT(load_s, 2.0 * kLiveLoadStallTimeoutS) << "the load was too quick to test the watchdog's patience";
  EXPECT_EQ(*code, 0) << job.output();
  EXPECT_EQ(job.output().find("start-up watchdog"), std::string::npos) << job.output();
}

// ---- stop signals ----

constexpr int kPromptCount = 300;
constexpr int kMaxTokens = 48;
constexpr int kCtx = 128;  // the too-long prompts fail against it
constexpr long kPartWayLines = 50;
constexpr int kTooLongEvery = 50;  // every 50th prompt is longer than --ctx: an error row

struct Paths {
  std::string dir, model, prompts;
  std::string args(const std::string& h5, const std::string& jsonl) const {
    return "--model " + model + " --prompts " + prompts + " --out " + h5 + " --jsonl " + jsonl + " --max-tokens " +
           std::to_string(kMaxTokens) + " --ctx " + std::to_string(kCtx) + " --flush-every 4 --flush-seconds 600";
  }
};

std::string write_prompts(const std::string& dir) {
  const std::string path = dir + "/prompts.jsonl";
  std::ofstream out(path);
  for (int i = 1; i <= kPromptCount; ++i) {
    std::string id = "p";
    id += std::to_string(i);
    std::string prompt = i % 3 ? "Once upon a time, a little cat" : "Tom went to the park and";
    if (i % kTooLongEvery == 0)
      for (int w = 0; w < kCtx; ++w) prompt += " and then";
    out << nlohmann::json{{"id", id}, {"prompt", prompt}}.dump() << "\n";
  }
  return path;
}

struct Summary {
  long long total = -1, failed = -1, finished = -1, left = -1, earlier = -1, prompt_tokens = -1;
};

// The "done:" line's leading fields, with the pattern benchmarks/scaling/sweep.sh uses to read it.
Summary parse_done(const std::string& output) {
  static const std::regex line(R"(done: (\d+) prompts \((\d+) failed\), (\d+) finished, (\d+) left, (\d+) earlier, )"
                               R"((\d+) prompt tokens, \d+ generated tokens in [0-9.]+ s: [0-9.]+ prompt tok/s, )"
                               R"([0-9.]+ generated tok/s, \d+ micro-batches\n)");
  static const std::regex sweep(R"(done: .* \((\d+) failed\), .* in ([0-9.]+) s: ([0-9.]+) prompt tok/s, )"
                                R"(([0-9.]+) generated tok/s, (\d+) micro-batches\n)");
  std::smatch m;
  Summary s;
  EXPECT_TRUE(std::regex_search(output, sweep)) << "sweep.sh's pattern no longer reads the summary\n" << output;
  if (!std::regex_search(output, m, line)) {
    ADD_FAILURE() << "no summary line\n" << output;
    return s;
  }
  s = {std::stoll(m[1]), std::stoll(m[2]), std::stoll(m[3]), std::stoll(m[4]), std::stoll(m[5]), std::stoll(m[6])};
  return s;
}

// The prompt tokens of the rows that ran ("ok"), and how many rows failed.
std::pair<long long, long long> ok_tokens_and_failures(const std::string& jsonl) {
  long long tokens = 0, failures = 0;
  for (const auto& row : glacier::testing::read_jsonl(jsonl)) {
    if (row["status"] == "ok")
      tokens += static_cast<long long>(row["prompt_tokens"].size());
    else
      ++failures;
  }
  return {tokens, failures};
}

bool wait_until_part_way(BackgroundProcess& job, const std::string& jsonl) {
  const double t0 = glacier::now_seconds();
  while (glacier::now_seconds() - t0 < kPhaseWaitS) {
    std::ifstream in(jsonl, std::ios::binary);
    if (std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n') >= kPartWayLines)
      return job.running();
    if (!job.running()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// Where the stop signal goes: the launcher wrapper a user runs (jobs/glacier_run.sh), or one rank.
struct StopCase {
  const char* name;
  int signal_number;
  int rank;  // -1: the wrapper
};
void PrintTo(const StopCase& c, std::ostream* os) { *os << c.name; }

class StopSignal : public ::testing::TestWithParam<StopCase> {
 protected:
  static void SetUpTestSuite() {
    GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
    paths_.model = model;
    paths_.dir = glacier::testing::scratch_dir("stop-signals");
    paths_.prompts = write_prompts(paths_.dir);
    const std::string jsonl = paths_.dir + "/ref.jsonl";
    const auto ref = run_glacier(kRanks, paths_.args(paths_.dir + "/ref.h5", jsonl), kJobTimeLimitS);
    ASSERT_EQ(ref.exit_code, 0) << ref.output;
    reference_ = read_text(jsonl);
    const Summary s = parse_done(ref.output);
    EXPECT_EQ(s.failed, kPromptCount / kTooLongEvery) << ref.output;
    EXPECT_EQ(s.finished + s.failed, kPromptCount);
    EXPECT_EQ(s.left, 0);
    // Failed prompts' tokens were never processed: the line counts only the rows that ran.
    const auto [tokens, failures] = ok_tokens_and_failures(jsonl);
    EXPECT_EQ(failures, s.failed);
    EXPECT_EQ(s.prompt_tokens, tokens) << ref.output;
  }
  static Paths paths_;
  static std::string reference_;
};
Paths StopSignal::paths_;
std::string StopSignal::reference_;

TEST_P(StopSignal, DrainsExits75OnEveryRankThenResumeMatchesUninterruptedRun) {
  ASSERT_FALSE(reference_.empty()) << "the reference run failed or was skipped";
  const StopCase c = GetParam();
  const std::string h5 = paths_.dir + "/" + c.name + ".h5", jsonl = paths_.dir + "/" + c.name + ".jsonl";
  std::vector<std::string> argv = glacier::testing::glacier_argv(kRanks, paths_.args(h5, jsonl));
  if (c.rank < 0) argv.insert(argv.begin(), std::string(GLACIER_SOURCE_DIR) + "/jobs/glacier_run.sh");
  std::string output;
  {
    BackgroundProcess job(argv, paths_.dir + "/" + c.name + ".log");
    ASSERT_TRUE(wait_until_part_way(job, jsonl)) << "the job ended (or stalled) before it was part way\n"
                                                 << job.output();
    if (c.rank < 0) {
      job.signal(c.signal_number);
    } else {
      const auto target = glacier::testing::pid_of_mpi_rank(job.pid(), c.rank);
      ASSERT_TRUE(target.has_value()) << job.output();
      ASSERT_EQ(::kill(*target, c.signal_number), 0);
    }
    const auto code = job.wait_for(kJobTimeLimitS);
    output = job.output();
    ASSERT_TRUE(code.has_value()) << "no end within " << kJobTimeLimitS << " s of the signal\n" << output;
    EXPECT_EQ(*code, kExitInterrupted) << output;
  }
  // Every rank exited 75: mpiexec reports the first non-zero code, and none may differ.
  EXPECT_EQ(output.find("Exit code:    1\n"), std::string::npos) << output;
  EXPECT_NE(output.find("rerun with --resume to finish"), std::string::npos) << output;
  if (c.rank > 0) {
    std::string named = " to rank ";
    named += std::to_string(c.rank);
    EXPECT_NE(output.find(named + ": draining the job"), std::string::npos) << "rank 0 should say whose signal\n"
                                                                           << output;
  }
  const Summary s = parse_done(output);
  EXPECT_GT(s.left, 0) << "the stop came too late to leave prompts\n" << output;
  EXPECT_EQ(s.finished + s.failed + s.left + s.earlier, kPromptCount) << output;
  const auto [tokens, failures] = ok_tokens_and_failures(jsonl);
  EXPECT_EQ(failures, s.failed) << output;
  EXPECT_EQ(s.prompt_tokens, tokens) << output;
  std::printf("%s: drained with %lld finished, %lld failed, %lld left\n", c.name, s.finished, s.failed, s.left);

  const auto resumed = run_glacier(kRanks, paths_.args(h5, jsonl) + " --resume", kJobTimeLimitS);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const Summary r = parse_done(resumed.output);
  EXPECT_EQ(r.earlier, s.finished + s.failed) << resumed.output;
  EXPECT_EQ(r.left, 0);
  EXPECT_TRUE(read_text(jsonl) == reference_) << "the resumed JSONL differs from the uninterrupted run's";
}

INSTANTIATE_TEST_SUITE_P(Targets, StopSignal,
                         ::testing::Values(StopCase{"wrapper_sigterm", SIGTERM, -1},
                                           StopCase{"wrapper_sigint", SIGINT, -1},
                                           StopCase{"wrapper_sighup", SIGHUP, -1},
                                           StopCase{"rank1_sigusr1", SIGUSR1, 1},
                                           StopCase{"rank1_sigterm", SIGTERM, 1},
                                           StopCase{"rank0_sighup", SIGHUP, 0}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
