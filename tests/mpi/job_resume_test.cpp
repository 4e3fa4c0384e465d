// A stories260K job over 300 prompts that is stopped part way (SIGUSR1 drains it, SIGKILL kills every
// process or one rank, SIGSTOP freezes one rank until the stall watchdog ends the job) and finished with
// --resume must give the uninterrupted run's JSONL byte for byte and the same HDF5 rows; a --resume
// whose model or a result-changing setting differs is refused without touching the earlier outputs.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "common/h5py_check.h"
#include "common/job_runner.h"
#include "common/process.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"
#include "util/clock.h"

namespace {

namespace fs = std::filesystem;
using glacier::io::ResultRecord;
using glacier::testing::BackgroundProcess;
using glacier::testing::read_text;
using glacier::testing::run_glacier;

constexpr int kPromptCount = 300;
constexpr int kMaxTokens = 48;
constexpr int kFlushEvery = 4;
constexpr int kExitInterrupted = 75;  // src/app/job.h: stopped by a signal after flushing
constexpr int kExitInputError = 2;
// One job takes a few seconds here; the limit only stops a hung job (each must stay under ~60 s).
constexpr int kJobTimeLimitS = 60;
// A refusal comes before any prompt runs: seconds at most, so a hang is cut short.
constexpr int kRefusalTimeLimitS = 20;
constexpr double kPartWayTimeoutS = 30.0;
// Results arrive in bursts of up to one per KV slot (32 by default): past the first burst, with
// several --flush-every flushes on disk and most prompts still to come.
constexpr long kPartWayLines = 50;
// A killed or stopped rank must end the whole job this fast (the reliability issue's bound): Open MPI
// notices a dead rank within ~2 s here; a stopped one takes --stall-timeout plus the answer grace.
constexpr double kRankFaultEndS = 10.0;
// How long a killed process may take to be gone, files closed (a sanitizer build tears down slowly).
constexpr double kLeftoverExitS = 10.0;
constexpr int kFaultStallTimeoutS = 2;
// The watchdog's own bound for ranks waiting on a silent rank 0 is 2 x the timeout plus the grace.
constexpr int kRankZeroStallTimeoutS = 1;

// Varied short prompts; every fifth one is sampled (temperature 0.8, its own seed) so that resuming a
// sampled request is covered as well as greedy ones.
std::string write_prompts(const std::string& dir) {
  static const char* const subjects[] = {"a little cat", "the old dog", "a small girl", "Tom", "Lily",
                                         "a big bear", "the king", "a happy bird", "Ben", "the red ball",
                                         "Sue and her mom"};
  static const char* const actions[] = {"went to the park", "found a box", "wanted to play", "was very sad",
                                        "saw a tall tree", "had a new toy", "liked to sing", "ran very fast",
                                        "said \"hello\""};
  const std::string path = dir + "/prompts.jsonl";
  std::ofstream out(path);
  for (int i = 1; i <= kPromptCount; ++i) {
    std::string id = "p";  // built with += (GCC 12 warns falsely on "p" + std::to_string(i))
    id += std::to_string(i);
    nlohmann::json line = {{"id", id}};
    const std::string subject = subjects[i % std::size(subjects)];
    const std::string action = actions[i % std::size(actions)];
    if (i % 7 == 0)
      line["prompt"] = "Once upon a time, " + subject;
    else if (i % 11 == 0)
      line["prompt"] = subject + " " + action + ". Then";
    else
      line["prompt"] = subject + " " + action;
    if (i % 5 == 0) {
      line["temperature"] = 0.8;
      line["seed"] = 1000 + 17 * i;
    }
    out << line.dump() << "\n";
  }
  return path;
}

struct Paths {
  std::string dir, model, prompts;
  std::string h5() const { return dir + "/run.h5"; }
  std::string jsonl() const { return dir + "/run.jsonl"; }
};

// --flush-seconds is far beyond a run's length so that every flush before the end is a count flush:
// a killed run then holds a multiple of --flush-every rows.
std::string job_args(const Paths& p, const std::string& h5, const std::string& jsonl, int max_tokens = kMaxTokens,
                     const std::string& model = "") {
  return "--model " + (model.empty() ? p.model : model) + " --prompts " + p.prompts + " --out " + h5 + " --jsonl " +
         jsonl + " --max-tokens " + std::to_string(max_tokens) + " --flush-every " + std::to_string(kFlushEvery) +
         " --flush-seconds 600";
}

struct Reference {
  std::string jsonl_text;
  std::vector<nlohmann::json> lines;
  std::map<std::string, ResultRecord> rows;  // by id
};

Reference run_reference(int np, const Paths& p) {
  Reference ref;
  const std::string h5 = p.dir + "/ref.h5", jsonl = p.dir + "/ref.jsonl";
  const auto run = run_glacier(np, job_args(p, h5, jsonl), kJobTimeLimitS);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  if (run.exit_code != 0) return ref;
  ref.jsonl_text = read_text(jsonl);
  ref.lines = glacier::testing::read_jsonl(jsonl);
  EXPECT_EQ(ref.lines.size(), size_t{kPromptCount});
  for (const auto& line : ref.lines) EXPECT_EQ(line["status"], "ok") << line.dump();
  for (auto& row : glacier::io::read_finished(h5).rows) ref.rows.emplace(row.id, std::move(row));
  EXPECT_EQ(ref.rows.size(), size_t{kPromptCount});
  return ref;
}

std::vector<uint32_t> float_bits(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  if (!values.empty()) std::memcpy(bits.data(), values.data(), 4 * values.size());
  return bits;
}

// Every row has a unique id and equals the reference row of that id in everything that does not
// depend on timing.
void expect_rows_match(const std::vector<ResultRecord>& rows, const Reference& ref, const std::string& what) {
  std::set<std::string> seen;
  for (const ResultRecord& row : rows) {
    EXPECT_TRUE(seen.insert(row.id).second) << what << ": id " << row.id << " appears twice";
    auto it = ref.rows.find(row.id);
    if (it == ref.rows.end()) {
      ADD_FAILURE() << what << ": row id " << row.id << " is not in the reference run";
      continue;
    }
    const ResultRecord& want = it->second;
    EXPECT_EQ(row.index, want.index) << what << " " << row.id;
    EXPECT_EQ(row.status, want.status) << what << " " << row.id;
    EXPECT_EQ(row.error, want.error) << what << " " << row.id;
    EXPECT_EQ(row.prompt_tokens, want.prompt_tokens) << what << " " << row.id;
    EXPECT_EQ(row.tokens, want.tokens) << what << " " << row.id;
    EXPECT_EQ(float_bits(row.logprobs), float_bits(want.logprobs)) << what << " " << row.id;
    EXPECT_EQ(row.text, want.text) << what << " " << row.id;
    EXPECT_EQ(row.finish_reason, want.finish_reason) << what << " " << row.id;
  }
}

// A finished (resumed) run: JSONL byte for byte the reference's, one HDF5 row per prompt, equal to the
// reference's, and the file counts the resume.
void expect_same_as_reference(const Paths& p, const Reference& ref) {
  const auto lines = glacier::testing::read_jsonl(p.jsonl());
  ASSERT_EQ(lines.size(), ref.lines.size());
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i], ref.lines[i]) << "JSONL line " << i + 1;
  EXPECT_TRUE(read_text(p.jsonl()) == ref.jsonl_text) << "the resumed JSONL differs from the reference in its bytes";
  const auto finished = glacier::io::read_finished(p.h5());
  EXPECT_EQ(finished.rows.size(), size_t{kPromptCount});
  expect_rows_match(finished.rows, ref, "resumed " + p.h5());
  auto resumes = finished.attributes.find("resumes");
  ASSERT_NE(resumes, finished.attributes.end());
  EXPECT_EQ(std::get<int64_t>(resumes->second), 1);
}

// Waits until the job is part way: its JSONL (written in input order as results arrive) holds
// kPartWayLines lines. The HDF5 file cannot be polled instead: the writer holds HDF5's file lock.
// Returns false when the job ended first or never got there.
bool wait_until_part_way(BackgroundProcess& job, const std::string& jsonl) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kPartWayTimeoutS);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(jsonl, std::ios::binary);
    const auto lines = std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n');
    if (lines >= kPartWayLines) return job.running();
    if (!job.running()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// Starts the job (extra_args after the usual ones, its output in <dir>/<log_name>) and waits until it is
// part way; nullptr, with a failure saying there is nothing to `action`, when it ended or stalled first.
std::unique_ptr<BackgroundProcess> start_until_part_way(const Paths& p, int np, const std::string& extra_args,
                                                        const std::string& log_name, const std::string& action) {
  auto job = std::make_unique<BackgroundProcess>(
      glacier::testing::glacier_argv(np, job_args(p, p.h5(), p.jsonl()) + extra_args), p.dir + "/" + log_name);
  if (wait_until_part_way(*job, p.jsonl())) return job;
  ADD_FAILURE() << "the job ended (or stalled) before it was part way: nothing to " << action << "\n" << job->output();
  return nullptr;
}

std::optional<pid_t> pid_of_rank(const BackgroundProcess& job, int rank) {
  return glacier::testing::pid_of_mpi_rank(job.pid(), rank);
}

// The rows an interrupted job left in its results file: some, not all, each the reference's; `cause`
// names the interruption in the messages ("the stop"), `label` the file ("interrupted").
glacier::io::FinishedResults expect_part_of_the_rows(const Paths& p, const Reference& ref, const std::string& cause,
                                                      const std::string& label) {
  auto left = glacier::io::read_finished(p.h5());
  EXPECT_GT(left.rows.size(), 0u) << "no rows were flushed before " << cause;
  EXPECT_LT(left.rows.size(), size_t{kPromptCount}) << cause << " came too late to test resuming";
  expect_rows_match(left.rows, ref, label + " " + p.h5());
  return left;
}

// Runs the job, sends `signal_number` to one rank part way, and checks that the job ends on its own
// within kRankFaultEndS with a non-zero code and a readable prefix of the reference rows; returns the output.
std::string fault_one_rank(const Paths& p, const Reference& ref, int np, int rank, int signal_number,
                           const std::string& extra_args) {
  const auto started = start_until_part_way(p, np, extra_args, "fault.log", "interrupt");
  if (!started) return "";
  BackgroundProcess& job = *started;
  const std::optional<pid_t> target = pid_of_rank(job, rank);
  if (!target) {
    ADD_FAILURE() << "rank " << rank << " not found among the job's processes";
    return job.output();
  }
  // Every process of the job, kept to make sure none is left holding the results file after the fault
  // (a launcher may exit before a stopped rank has taken its kill).
  const std::vector<pid_t> processes = glacier::testing::descendants_of(job.pid());
  const double t0 = glacier::now_seconds();
  ::kill(*target, signal_number);
  const auto code = job.wait_for(kRankFaultEndS + 5.0);
  const double took = glacier::now_seconds() - t0;
  EXPECT_TRUE(code.has_value()) << "the job still runs " << took << " s after signal " << signal_number
                                << " to rank " << rank << "\n" << job.output();
  EXPECT_LT(took, kRankFaultEndS) << job.output();
  if (code) {
    EXPECT_NE(*code, 0) << job.output();
  }
  std::printf("np %d: signal %d to rank %d ended the job in %.1f s\n", np, signal_number, rank, took);
  const std::string output = job.output();
  job.kill_tree();  // nothing may be left behind (a stopped rank especially)
  EXPECT_TRUE(glacier::testing::kill_and_wait_gone(processes, kLeftoverExitS)) << "a rank outlived the job and its kill";
  const auto left = expect_part_of_the_rows(p, ref, "the fault", "after the fault");
  glacier::testing::expect_h5py_row_count(p.h5(), left.rows.size());
  return output;
}

void resume_and_compare(const Paths& p, const Reference& ref, int np) {
  const auto resumed = run_glacier(np, job_args(p, p.h5(), p.jsonl()) + " --resume", kJobTimeLimitS);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_as_reference(p, ref);
}

class JobResume : public ::testing::TestWithParam<int> {
 protected:
  // Every test runs the same model (skipped, naming it, when ../shared lacks it).
  void SetUp() override {
    GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
    paths_.model = model;
  }

  // Fills the rest of paths_ (scratch folder `name`) and the reference run; false (with the test failed)
  // when that is impossible.
  bool prepare_reference_run(const std::string& name) {
    paths_.dir = glacier::testing::scratch_dir(name + "-np" + std::to_string(GetParam()));
    paths_.prompts = write_prompts(paths_.dir);
    ref_ = run_reference(GetParam(), paths_);
    return !::testing::Test::HasFailure();
  }

  Paths paths_;
  Reference ref_;
};

TEST_P(JobResume, StopSignalDrainsThenResumeMatchesUninterruptedRun) {
  ASSERT_TRUE(prepare_reference_run("resume-usr1")) << "the reference run failed";
  const int np = GetParam();
  const Paths& p = paths_;
  {
    const auto started = start_until_part_way(p, np, "", "usr1.log", "interrupt");
    if (!started) return;  // the failure is recorded
    BackgroundProcess& job = *started;
    job.signal(SIGUSR1);  // mpiexec forwards SIGUSR1 to every rank
    const auto code = job.wait_for(kJobTimeLimitS);
    ASSERT_TRUE(code.has_value()) << "the job did not stop within " << kJobTimeLimitS << " s of SIGUSR1\n"
                                  << job.output();
    EXPECT_EQ(*code, kExitInterrupted) << job.output();
    EXPECT_NE(job.output().find("--resume"), std::string::npos) << "the message should say how to finish\n"
                                                                   << job.output();
  }
  const auto interrupted = expect_part_of_the_rows(p, ref_, "the stop", "interrupted");
  // The drained run wrote every result it finished to both outputs.
  EXPECT_EQ(glacier::testing::read_jsonl(p.jsonl()).size(), interrupted.rows.size());
  std::printf("np %d: SIGUSR1 left %zu of %d rows\n", np, interrupted.rows.size(), kPromptCount);

  resume_and_compare(p, ref_, np);
}

TEST_P(JobResume, KilledJobLeavesReadablePrefixThenResumeMatchesUninterruptedRun) {
  ASSERT_TRUE(prepare_reference_run("resume-kill")) << "the reference run failed";
  const int np = GetParam();
  const Paths& p = paths_;
  {
    const auto started = start_until_part_way(p, np, "", "kill.log", "kill");
    if (!started) return;  // the failure is recorded
    BackgroundProcess& job = *started;
    const std::vector<pid_t> tree = glacier::testing::descendants_of(job.pid());
    EXPECT_GE(tree.size(), size_t(np)) << "expected mpiexec to have started " << np << " ranks";
    job.kill_tree();
    for (pid_t rank : tree) {
      for (int tries = 0; tries < 250 && glacier::testing::is_alive(rank); ++tries)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      EXPECT_FALSE(glacier::testing::is_alive(rank)) << "process " << rank << " survived SIGKILL";
    }
  }
  const auto killed = expect_part_of_the_rows(p, ref_, "the kill", "killed");
  EXPECT_EQ(killed.rows.size() % kFlushEvery, 0u) << "only whole flushes of --flush-every rows may be on disk";
  std::printf("np %d: SIGKILL left %zu of %d rows\n", np, killed.rows.size(), kPromptCount);
  glacier::testing::expect_h5py_row_count(p.h5(), killed.rows.size());

  resume_and_compare(p, ref_, np);
}

TEST_P(JobResume, ResumeWithOtherModelOrOptionsIsRefusedAndTouchesNothing) {
  ASSERT_TRUE(prepare_reference_run("resume-refuse")) << "the reference run failed";
  GLACIER_REQUIRE_SHARED(other_model, "models/stories260K-q8_0.gguf");
  const int np = GetParam();
  const Paths& p = paths_;
  const std::string h5 = p.dir + "/ref.h5", jsonl = p.dir + "/ref.jsonl";
  const std::string h5_before = read_text(h5);
  struct Case {
    std::string args, what;
  };
  const Case cases[] = {
      {job_args(p, h5, jsonl, 32), "max_tokens: 48 in the file, 32 now"},
      {job_args(p, h5, jsonl) + " --wire int8", "wire: \"f32\" in the file, \"int8\" now"},
      {job_args(p, h5, jsonl, kMaxTokens, other_model), "the model's SHA-256 is"},
  };
  for (const Case& c : cases) {
    const auto run = run_glacier(np, c.args + " --resume", kRefusalTimeLimitS);
    EXPECT_EQ(run.exit_code, kExitInputError) << c.args << "\n" << run.output;
    EXPECT_NE(run.output.find("--resume: cannot resume from " + h5), std::string::npos) << run.output;
    EXPECT_NE(run.output.find(c.what), std::string::npos) << run.output;
    EXPECT_TRUE(read_text(h5) == h5_before) << "a refused --resume changed " << h5;
    EXPECT_TRUE(read_text(jsonl) == ref_.jsonl_text) << "a refused --resume changed " << jsonl;
  }
}

TEST_P(JobResume, KilledLastRankEndsJobThenResumeMatchesUninterruptedRun) {
  ASSERT_TRUE(prepare_reference_run("fault-kill-rank")) << "the reference run failed";
  const int np = GetParam();
  fault_one_rank(paths_, ref_, np, np - 1, SIGKILL, "");
  resume_and_compare(paths_, ref_, np);
}

TEST_P(JobResume, StoppedLastRankIsNamedByWatchdogThenResumeMatchesUninterruptedRun) {
  ASSERT_TRUE(prepare_reference_run("fault-stop-rank")) << "the reference run failed";
  const int np = GetParam();
  const std::string output = fault_one_rank(paths_, ref_, np, np - 1, SIGSTOP,
                                            " --stall-timeout " + std::to_string(kFaultStallTimeoutS));
  std::string named = "rank ";  // built with += (GCC 12 warns falsely on "..." + std::to_string(...))
  named += std::to_string(np - 1);
  named += " (";
  EXPECT_NE(output.find("stall watchdog"), std::string::npos) << output;
  EXPECT_NE(output.find(named), std::string::npos) << "the stopped rank should be named\n" << output;
  EXPECT_NE(output.find("did not answer"), std::string::npos) << output;
  resume_and_compare(paths_, ref_, np);
}

TEST_P(JobResume, StoppedRankZeroIsNamedByTheOtherRanksThenResumeMatches) {
  ASSERT_TRUE(prepare_reference_run("fault-stop-rank0")) << "the reference run failed";
  const int np = GetParam();
  const std::string output = fault_one_rank(paths_, ref_, np, 0, SIGSTOP,
                                            " --stall-timeout " + std::to_string(kRankZeroStallTimeoutS));
  EXPECT_NE(output.find("rank 0 is stopped or hung"), std::string::npos) << output;
  resume_and_compare(paths_, ref_, np);
}

INSTANTIATE_TEST_SUITE_P(Ranks, JobResume, ::testing::Values(2, 3),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

}  // namespace
