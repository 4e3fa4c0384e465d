// Slurm on one machine (a throw-away cluster from tests/system/slurm_cluster.sh, one node of this machine's
// 2 CPUs): jobs/single_node.sbatch, the sharded array with its dependent merge of HDF5 and JSONL
// (jobs/submit_sharded.sh, with a GLACIER_ENV that activates a venv), and a job signalled mid-run that
// glacier_step.sh requeues and resumes each give the results of a plain `mpirun -np 1` run, bit for bit;
// a sharded job refuses shared outputs, and the merge a PYTHON without h5py.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "common/job_runner.h"
#include "common/process.h"
#include "common/results_match.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"

namespace {

namespace fs = std::filesystem;
using glacier::testing::RowsById;
using glacier::testing::run_shell;

const std::string kSourceDir = GLACIER_SOURCE_DIR;
const std::string kClusterScript = kSourceDir + "/tests/system/slurm_cluster.sh";
const std::string kJobsDir = kSourceDir + "/jobs";
const std::string kGlacierBin = std::string(GLACIER_BUILD_DIR) + "/glacier_mpi";
const std::string kStoriesPrompts = kSourceDir + "/tests/data/stories_prompts.jsonl";
constexpr size_t kStoriesPromptCount = 27;  // lines of tests/data/stories_prompts.jsonl
constexpr int kSkipExitCode = 77;           // slurm_cluster.sh check: not root, or Slurm/munge missing
constexpr int kMaxTokens = 64;
// The job scripts ask for no CPU count (a node of 2 CPUs must do): 2 ranks get one CPU each.
const std::string kTwoRanks = "--ntasks=2";
// The sharded test's array tasks: one rank given both CPUs, which the script must pass on as --threads 2.
const std::string kOneRankTwoCpus = "--ntasks=1 --cpus-per-task=2";
constexpr int64_t kTwoCpus = 2;
// The cluster is up in ~2 s; slurm_cluster.sh gives each of its 3 daemons 60 s on a loaded machine.
constexpr int kClusterStartLimitS = 200;
// Any scontrol/sbatch/scancel call answers in milliseconds; one that hangs must not hang the test.
constexpr int kClientLimitS = 20;
// Each job runs for a few seconds and starts within a second of being eligible (slurm_cluster.sh
// schedules every second); the limit only catches a hung job, well inside the ~2 min a test may take.
constexpr double kJobLimitS = 90;
// The no-Slurm reference runs take seconds; the limit stops a hung one.
constexpr int kReferenceLimitS = 60;
// Characters of the test's name in its scratch directory: enough to tell the tests apart.
constexpr size_t kDirNameChars = 12;
// A job refused by its script (a shared output, a Python without h5py) fails with this exit code.
const std::string kRefusedExit = "2:0";
// How often the job's state and output are looked at while waiting.
constexpr auto kPollInterval = std::chrono::milliseconds(200);

// The requeue test's job: enough prompts that a signal sent when the first results appear finds most of
// them still to run. Every message between the two ranks is held 10 ms (--inject-latency-ms changes
// timing only, not results, and --resume does not compare it): each decode step then takes at least
// 20 ms, so the job lasts ~10 s however fast or idle the machine is, while the signal reaches the ranks
// within about a second.
constexpr int kRequeuePromptCount = 200;
constexpr int kInjectedLatencyMs = 10;
constexpr int kRequeueFlushEvery = 4;
// The signal goes as soon as the JSONL (written in input order as results arrive) has a line: the ring
// is running, and nearly all of the job is left.
constexpr long kSignalAfterLines = 1;
// First run until the signal (~2 s), the drain, the requeued job's wait (cred_expire, 10 s in
// slurm_cluster.sh) and the rest of the prompts at the injected latency (~10 s).
constexpr double kRequeuedJobLimitS = 100;

// A throw-away cluster in `dir`, stopped by the destructor so that it ends however the test ends. Its
// owner is this process: if the test is killed instead, the cluster's watcher stops it.
class SlurmCluster {
 public:
  explicit SlurmCluster(const std::string& dir) : dir_(dir) {
    const auto start = run_shell("timeout " + std::to_string(kClusterStartLimitS) + " bash " + kClusterScript +
                                 " start " + dir + " " + std::to_string(::getpid()));
    start_output_ = start.output;
    const std::string prefix = "export SLURM_CONF=";
    const size_t at = start.output.find(prefix);
    if (start.exit_code != 0 || at == std::string::npos) return;
    const size_t begin = at + prefix.size();
    const std::string conf = start.output.substr(begin, start.output.find('\n', begin) - begin);
    ::setenv("SLURM_CONF", conf.c_str(), 1);  // every client (sbatch, scontrol, the job scripts) inherits it
    started_ = true;
  }
  ~SlurmCluster() {
    const auto stop = run_shell("bash " + kClusterScript + " stop " + dir_);
    EXPECT_EQ(stop.exit_code, 0) << "slurm_cluster.sh stop " << dir_ << ":\n" << stop.output;
    ::unsetenv("SLURM_CONF");
  }
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  bool started() const { return started_; }
  const std::string& start_output() const { return start_output_; }
  std::string logs() const { return run_shell("bash " + kClusterScript + " logs " + dir_).output; }

 private:
  std::string dir_;
  std::string start_output_;
  bool started_ = false;
};

// One record of `scontrol show job -o ID` (an array job has one a task).
struct JobRecord {
  std::string id, state, exit_code;
  int restarts = -1;
};

// States after which Slurm does nothing more with a job (COMPLETING and REQUEUED are on the way).
bool is_final(const std::string& state) {
  static const char* const kFinal[] = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                                       "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"};
  return std::find(std::begin(kFinal), std::end(kFinal), state) != std::end(kFinal);
}

std::optional<std::vector<JobRecord>> show_job(const std::string& id) {
  const auto shown = run_shell("timeout " + std::to_string(kClientLimitS) + " scontrol show job -o " + id);
  if (shown.exit_code != 0) return std::nullopt;
  std::vector<JobRecord> records;
  std::istringstream lines(shown.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("JobId=") == std::string::npos) continue;
    JobRecord r;
    std::istringstream fields(line);
    for (std::string f; fields >> f;) {
      const size_t eq = f.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = f.substr(0, eq), value = f.substr(eq + 1);
      if (key == "JobId") r.id = value;
      else if (key == "JobState") r.state = value;
      else if (key == "ExitCode") r.exit_code = value;
      else if (key == "Restarts") r.restarts = std::atoi(value.c_str());
    }
    records.push_back(r);
  }
  if (records.empty()) return std::nullopt;
  return records;
}

std::string describe(const std::vector<JobRecord>& records) {
  std::string s;
  for (const JobRecord& r : records)
    s += "job " + r.id + ": " + r.state + ", exit " + r.exit_code + ", restarts " + std::to_string(r.restarts) + "\n";
  return s;
}

// Polls until every record of the job is in a final state; nullopt when `seconds` pass first.
std::optional<std::vector<JobRecord>> wait_for_job_end(const std::string& id, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto records = show_job(id);
    if (records && std::all_of(records->begin(), records->end(), [](const JobRecord& r) { return is_final(r.state); }))
      return records;
    std::this_thread::sleep_for(kPollInterval);
  }
  return std::nullopt;
}

// The id `sbatch --parsable` printed ("ID" or "ID;CLUSTER" on the last line), or "".
std::string submitted_id(const std::string& output) {
  static const std::regex kParsable(R"((?:^|\n)(\d+)(?:;\S+)?\s*$)");
  std::smatch m;
  return std::regex_search(output, m, kParsable) ? m[1].str() : "";
}

std::string read_or_empty(const std::string& path) {
  try {
    return glacier::testing::read_text(path);
  } catch (const std::exception&) {
    return "";
  }
}

long line_count(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return static_cast<long>(std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n'));
}

// Varied short prompts; every fifth one sampled (temperature 0.8, its own seed), so that resuming a
// sampled request is covered as well as greedy ones.
std::string write_prompts(const std::string& dir, int count) {
  static const char* const subjects[] = {"a little cat", "the old dog", "a small girl", "Tom", "Lily",
                                         "a big bear", "the king", "a happy bird", "Ben", "Sue and her mom"};
  static const char* const actions[] = {"went to the park", "found a box", "wanted to play", "was very sad",
                                        "saw a tall tree", "had a new toy", "liked to sing", "ran very fast"};
  const std::string path = dir + "/prompts.jsonl";
  std::ofstream out(path);
  for (int i = 0; i < count; ++i) {
    std::string id = "q";  // built with += (GCC 12 warns falsely on "q" + std::to_string(i))
    id += std::to_string(i);
    nlohmann::json line = {{"id", id},
                           {"prompt", std::string(subjects[i % std::size(subjects)]) + " " +
                                          actions[(i / std::size(subjects)) % std::size(actions)]}};
    if (i % 5 == 0) {
      line["temperature"] = 0.8;
      line["seed"] = 1000 + 17 * i;
    }
    out << line.dump() << "\n";
  }
  return path;
}

// A venv of the system Python (which has h5py): with its site packages, as a cluster's module or venv
// provides h5py, or without them, a Python the merge must refuse. "" (and a failure) if it cannot be made.
std::string make_venv(const std::string& dir, bool system_site_packages) {
  const auto made = run_shell("/usr/bin/python3 -m venv --without-pip " +
                              std::string(system_site_packages ? "--system-site-packages " : "") + dir);
  EXPECT_EQ(made.exit_code, 0) << "python3 -m venv " << dir << ":\n" << made.output;
  return made.exit_code == 0 ? dir + "/bin/python3" : "";
}

// The --threads a results file's run used (its "options" attribute, every option as JSON).
int64_t threads_of(const glacier::io::FinishedResults& results) {
  return nlohmann::json::parse(std::get<std::string>(results.attributes.at("options"))).at("threads").get<int64_t>();
}

class Slurm : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto check = run_shell("bash " + kClusterScript + " check");
    if (check.exit_code == kSkipExitCode) GTEST_SKIP() << "Slurm test skipped: " << check.output;
    ASSERT_EQ(check.exit_code, 0) << "slurm_cluster.sh check: " << check.output;
    model_ = glacier::testing::shared_path("models/stories260K.gguf");
    if (model_.empty()) GTEST_SKIP() << "needs models/stories260K.gguf under GLACIER_SHARED_DIR (../shared): not found, skipped";
    // Short: slurmstepd's Unix sockets live under the cluster's directory (slurm_cluster.sh checks the length).
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    const std::string dir = glacier::testing::scratch_dir("slurm-" + name.substr(0, kDirNameChars)) + "/cluster";
    cluster_ = std::make_unique<SlurmCluster>(dir);
    ASSERT_TRUE(cluster_->started()) << "slurm_cluster.sh start " << dir << " failed:\n" << cluster_->start_output();
    // Inside the cluster's directory: stopping the cluster also ends anything a job left running here.
    work_ = dir + "/work";
    fs::create_directories(work_);
  }

  // `env VARS... ` for sbatch: the job scripts read these (sbatch passes the environment on).
  std::string job_env(const std::string& prompts) const {
    return "env MODEL=" + model_ + " PROMPTS=" + prompts + " GLACIER_BIN=" + kGlacierBin + " ";
  }

  // The same prompts through `mpirun -np 1 glacier_mpi` outside Slurm: the rows every job must reproduce.
  RowsById reference(const std::string& prompts, size_t count, const std::string& extra_args) {
    const std::string out = work_ + "/reference.h5";
    const auto run = glacier::testing::run_glacier(1, "--model " + model_ + " --prompts " + prompts + " --max-tokens " +
                                                          std::to_string(kMaxTokens) + " --bind none --out " + out +
                                                          extra_args,
                                                   kReferenceLimitS);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    if (run.exit_code != 0) return {};
    RowsById rows = glacier::testing::rows_by_id(glacier::io::read_finished(out).rows, out);
    EXPECT_EQ(rows.size(), count) << "the reference run " << out;
    for (const auto& [id, row] : rows) EXPECT_EQ(row.status, "ok") << "reference " << id << ": " << row.error;
    return rows;
  }

  // Submits with `sbatch --parsable`, run from the work directory; "" (and a failure) when it is refused.
  std::string sbatch(const std::string& env, const std::string& args) {
    const auto submit = run_shell("cd " + work_ + " && " + env + "timeout " + std::to_string(kClientLimitS) +
                                  " sbatch --parsable " + args);
    const std::string id = submitted_id(submit.output);
    EXPECT_TRUE(submit.exit_code == 0 && !id.empty())
        << "sbatch " << args << ": expected a job id, found exit " << submit.exit_code << ":\n" << submit.output;
    return submit.exit_code == 0 ? id : "";
  }

  std::string diagnostics(const std::string& job_log) const {
    return "----- " + job_log + "\n" + read_or_empty(job_log) + "\n" + cluster_->logs();
  }

  std::string model_, work_;
  std::unique_ptr<SlurmCluster> cluster_;
};

TEST_F(Slurm, SingleNodeJobMatchesOneRankRun) {
  const RowsById want = reference(kStoriesPrompts, kStoriesPromptCount, "");
  ASSERT_FALSE(HasFailure()) << "the reference run failed";
  const std::string out = work_ + "/single.h5";
  const std::string id = sbatch(job_env(kStoriesPrompts) + "GLACIER_JOBS_DIR=" + kJobsDir + " OUT=" + out + " ",
                                kTwoRanks + " --output=" + work_ + "/single-%j.log " + kJobsDir +
                                    "/single_node.sbatch --max-tokens " + std::to_string(kMaxTokens));
  ASSERT_FALSE(id.empty());
  const std::string log = work_ + "/single-" + id + ".log";
  const auto end = wait_for_job_end(id, kJobLimitS);
  ASSERT_TRUE(end.has_value()) << "job " << id << " did not end within " << kJobLimitS << " s\n" << diagnostics(log);
  ASSERT_EQ(end->size(), 1u) << describe(*end);
  const JobRecord& job = end->front();
  EXPECT_EQ(job.state, "COMPLETED") << describe(*end) << diagnostics(log);
  EXPECT_EQ(job.exit_code, "0:0") << describe(*end) << diagnostics(log);
  EXPECT_EQ(job.restarts, 0) << describe(*end);
  ASSERT_TRUE(fs::exists(out)) << "the job wrote no " << out << "\n" << diagnostics(log);

  const auto results = glacier::io::read_finished(out);
  // srun started one job of two ranks (over PMIx), not two single-rank jobs writing the same file.
  EXPECT_EQ(std::get<int64_t>(results.attributes.at("ranks")), 2);
  // No --cpus-per-task: the job's CPUs on the node (SLURM_CPUS_ON_NODE, 2) shared by its 2 ranks.
  EXPECT_EQ(threads_of(results), 1) << out;
  EXPECT_EQ(std::get<int64_t>(results.attributes.at("prompt_count")), static_cast<int64_t>(kStoriesPromptCount));
  glacier::testing::expect_same_results(results.rows, want, out);
}

TEST_F(Slurm, ShardedArrayAndMergeMatchOneRankRun) {
  constexpr int kShards = 2;
  const std::string ref_jsonl = work_ + "/reference.jsonl";
  const RowsById want = reference(kStoriesPrompts, kStoriesPromptCount, " --jsonl " + ref_jsonl);
  ASSERT_FALSE(HasFailure()) << "the reference run failed";
  // The site's environment hook: activates a venv (as `module load` or a lab's venv would) and sets
  // GLACIER_BIN, which the test does not pass itself: the jobs run only if they source it.
  const std::string venv = work_ + "/venv";
  const std::string venv_python = make_venv(venv, true);
  ASSERT_FALSE(venv_python.empty());
  const std::string env_file = work_ + "/site-env.sh";
  std::ofstream(env_file) << "source " << venv << "/bin/activate\nexport GLACIER_BIN=" << kGlacierBin << "\n";
  const std::string shards = work_ + "/shards", merged = work_ + "/merged.h5", merged_jsonl = work_ + "/merged.jsonl";
  // No GLACIER_JOBS_DIR here: submit_sharded.sh must tell the array and the merge where jobs/ is. No
  // PYTHON either: the merge must find the venv's, which has h5py.
  const auto submit = run_shell("cd " + work_ + " && env MODEL=" + model_ + " PROMPTS=" + kStoriesPrompts +
                                " GLACIER_ENV=" + env_file + " SHARDS=" + std::to_string(kShards) + " OUT_DIR=" +
                                shards + " MERGED=" + merged + " timeout " + std::to_string(kClientLimitS) + " bash " +
                                kJobsDir + "/submit_sharded.sh " + kOneRankTwoCpus + " --output=" + work_ +
                                "/shard-%A_%a.log -- --max-tokens " + std::to_string(kMaxTokens));
  std::smatch m;
  static const std::regex kSubmitted(R"(array job (\d+) .*, merge job (\d+) -> (\S+), (\S+))");
  ASSERT_TRUE(submit.exit_code == 0 && std::regex_search(submit.output, m, kSubmitted))
      << "submit_sharded.sh: expected 'array job N (...), merge job M -> H5, JSONL', found exit " << submit.exit_code
      << ":\n" << submit.output;
  const std::string array_id = m[1].str(), merge_id = m[2].str();
  EXPECT_EQ(m[3].str(), merged);
  EXPECT_EQ(m[4].str(), merged_jsonl) << "MERGED_JSONL defaults to MERGED with .jsonl";
  const std::string merge_log = work_ + "/glacier-merge-" + merge_id + ".log";  // merge_shards.sbatch's --output
  const auto shard_log = [&](int k) { return work_ + "/shard-" + array_id + "_" + std::to_string(k) + ".log"; };
  const auto shard_logs = [&] {
    std::string logs;
    for (int k = 0; k < kShards; ++k) logs += "----- " + shard_log(k) + "\n" + read_or_empty(shard_log(k)) + "\n";
    return logs;
  };

  // The merge waits for the whole array (afterok), so its end is the end of the run.
  const auto merge = wait_for_job_end(merge_id, kJobLimitS);
  ASSERT_TRUE(merge.has_value()) << "merge job " << merge_id << " did not end within " << kJobLimitS << " s\n"
                                 << shard_logs() << diagnostics(merge_log);
  const auto array = show_job(array_id);
  ASSERT_TRUE(array.has_value()) << "scontrol knows no array job " << array_id;
  EXPECT_EQ(array->size(), size_t{kShards}) << describe(*array);
  for (const JobRecord& task : *array) {
    EXPECT_EQ(task.state, "COMPLETED") << describe(*array) << shard_logs();
    EXPECT_EQ(task.exit_code, "0:0") << describe(*array) << shard_logs();
  }
  ASSERT_EQ(merge->front().state, "COMPLETED") << describe(*merge) << diagnostics(merge_log);
  EXPECT_EQ(merge->front().exit_code, "0:0") << describe(*merge) << diagnostics(merge_log);
  for (int k = 0; k < kShards; ++k)
    EXPECT_NE(read_or_empty(shard_log(k)).find("glacier: sourced GLACIER_ENV=" + env_file), std::string::npos)
        << shard_logs();
  EXPECT_NE(read_or_empty(merge_log).find("merge_shards: python " + venv_python + "\n"), std::string::npos)
      << "the merge should run the venv's python (first on PATH after GLACIER_ENV)\n" << read_or_empty(merge_log);

  // Each shard ran its own part (every prompt whose number is k mod 2) into its own HDF5 and JSONL, with
  // the CPUs Slurm gave its rank as threads; together they hold every prompt.
  size_t shard_rows = 0, shard_lines = 0;
  for (int k = 0; k < kShards; ++k) {
    const std::string shard = shards + "/shard-" + std::to_string(k) + "-of-" + std::to_string(kShards);
    const auto results = glacier::io::read_finished(shard + ".h5");
    EXPECT_GT(results.rows.size(), 0u) << shard << ".h5";
    EXPECT_EQ(threads_of(results), kTwoCpus) << shard << ".h5: --threads should be --cpus-per-task";
    EXPECT_EQ(static_cast<size_t>(line_count(shard + ".jsonl")), results.rows.size()) << shard << ".jsonl";
    shard_rows += results.rows.size();
    shard_lines += static_cast<size_t>(line_count(shard + ".jsonl"));
  }
  EXPECT_EQ(shard_rows, kStoriesPromptCount);
  EXPECT_EQ(shard_lines, kStoriesPromptCount);
  const auto results = glacier::io::read_finished(merged);
  EXPECT_EQ(std::get<int64_t>(results.attributes.at("shards")), kShards);
  EXPECT_EQ(std::get<int64_t>(results.attributes.at("prompt_count")), static_cast<int64_t>(kStoriesPromptCount));
  glacier::testing::expect_same_results(results.rows, want, merged);
  // The merged file is in input order, as one job's JSONL would be.
  for (size_t i = 0; i < results.rows.size(); ++i)
    EXPECT_EQ(results.rows[i].index, static_cast<int64_t>(i)) << merged << " row " << i;
  // The merged JSONL is, byte for byte, what one job writes for the whole prompt file.
  const std::string merged_text = read_or_empty(merged_jsonl);
  EXPECT_FALSE(merged_text.empty()) << merged_jsonl << " is missing or empty\n" << read_or_empty(merge_log);
  EXPECT_TRUE(merged_text == read_or_empty(ref_jsonl)) << merged_jsonl << " differs from " << ref_jsonl;
}

// The sharded job's refusals: --out or --jsonl among glacier_mpi's options (one file for every shard) at
// submission and in an array submitted by hand, and a merge whose PYTHON has no h5py.
TEST_F(Slurm, ShardedJobRefusesSharedOutputsAndPythonWithoutH5py) {
  const std::string shared = work_ + "/shared";
  for (const std::string& option : {std::string("--jsonl ") + shared + ".jsonl", "-o " + shared + ".h5"}) {
    const auto submit = run_shell("cd " + work_ + " && " + job_env(kStoriesPrompts) + "SHARDS=2 timeout " +
                                  std::to_string(kClientLimitS) + " bash " + kJobsDir + "/submit_sharded.sh " +
                                  kTwoRanks + " -- --max-tokens 8 " + option);
    EXPECT_EQ(submit.exit_code, 2) << option << ":\n" << submit.output;
    const std::string name = option.substr(0, option.find(' ')) == "-o" ? "out" : "jsonl";
    EXPECT_NE(submit.output.find("submit_sharded: expected no --" + name + " in the glacier_mpi options"),
              std::string::npos)
        << submit.output;
  }
  const auto queued = run_shell("timeout " + std::to_string(kClientLimitS) + " squeue -h -o %i");
  EXPECT_EQ(queued.exit_code, 0) << queued.output;
  EXPECT_EQ(queued.output, "") << "a refused submission must queue nothing";

  // By hand, past submit_sharded.sh: every array task refuses before running anything.
  const std::string array_id =
      sbatch(job_env(kStoriesPrompts) + "GLACIER_JOBS_DIR=" + kJobsDir + " OUT_DIR=" + work_ + "/shards ",
             "--array=0-1 " + kTwoRanks + " --output=" + work_ + "/refused-%A_%a.log " + kJobsDir +
                 "/array_shard.sbatch --max-tokens 8 --out=" + shared + ".h5");
  ASSERT_FALSE(array_id.empty());
  const auto array = wait_for_job_end(array_id, kJobLimitS);
  ASSERT_TRUE(array.has_value()) << "array job " << array_id << " did not end within " << kJobLimitS << " s";
  EXPECT_EQ(array->size(), 2u) << describe(*array);
  for (int k = 0; k < 2; ++k) {
    const std::string log = work_ + "/refused-" + array_id + "_" + std::to_string(k) + ".log";
    EXPECT_NE(read_or_empty(log).find("array_shard: expected no --out in the glacier_mpi options"), std::string::npos)
        << diagnostics(log);
  }
  for (const JobRecord& task : *array) {
    EXPECT_EQ(task.state, "FAILED") << describe(*array);
    EXPECT_EQ(task.exit_code, kRefusedExit) << describe(*array);
  }
  EXPECT_FALSE(fs::exists(shared + ".h5")) << "a refused shard wrote the shared file";

  // The merge with a PYTHON that lacks h5py stops, naming it, before it reads any shard.
  const std::string bare_python = make_venv(work_ + "/bare-venv", false);
  ASSERT_FALSE(bare_python.empty());
  const std::string merge_id = sbatch("env GLACIER_JOBS_DIR=" + kJobsDir + " OUT_DIR=" + work_ + "/shards PYTHON=" +
                                          bare_python + " ",
                                      "--output=" + work_ + "/merge-%j.log " + kJobsDir + "/merge_shards.sbatch");
  ASSERT_FALSE(merge_id.empty());
  const std::string merge_log = work_ + "/merge-" + merge_id + ".log";
  const auto merge = wait_for_job_end(merge_id, kJobLimitS);
  ASSERT_TRUE(merge.has_value()) << "merge job " << merge_id << " did not end within " << kJobLimitS << " s";
  EXPECT_EQ(merge->front().state, "FAILED") << describe(*merge) << diagnostics(merge_log);
  EXPECT_EQ(merge->front().exit_code, kRefusedExit) << describe(*merge) << diagnostics(merge_log);
  EXPECT_NE(read_or_empty(merge_log).find("glacier: PYTHON=" + bare_python + " (" + bare_python +
                                          "): expected an interpreter with h5py and numpy, found one without"),
            std::string::npos)
      << diagnostics(merge_log);
}

// What Slurm does near a time limit (--signal=B:USR1@SECONDS: the signal to the batch shell), sent now:
// glacier_step.sh passes it to the ranks, glacier_mpi drains and exits 75, the job is requeued and the
// requeued run resumes from the same --out file.
TEST_F(Slurm, SignalledJobIsRequeuedAndResumesToUninterruptedResults) {
  const std::string prompts = write_prompts(work_, kRequeuePromptCount);
  const std::string ref_jsonl = work_ + "/reference.jsonl";
  const RowsById want = reference(prompts, kRequeuePromptCount, " --jsonl " + ref_jsonl);
  ASSERT_FALSE(HasFailure()) << "the reference run failed";
  const std::string out = work_ + "/requeue.h5", jsonl = work_ + "/requeue.jsonl";
  const std::string id =
      sbatch(job_env(prompts) + "GLACIER_JOBS_DIR=" + kJobsDir + " OUT=" + out + " ",
             kTwoRanks + " --output=" + work_ + "/requeue-%j.log " + kJobsDir + "/single_node.sbatch --max-tokens " +
                 std::to_string(kMaxTokens) + " --jsonl " + jsonl + " --flush-every " +
                 std::to_string(kRequeueFlushEvery) + " --inject-latency-ms " + std::to_string(kInjectedLatencyMs));
  ASSERT_FALSE(id.empty());
  const std::string log = work_ + "/requeue-" + id + ".log";

  bool running_with_results = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kJobLimitS);
  while (!running_with_results && std::chrono::steady_clock::now() < deadline) {
    const auto job = show_job(id);  // nullopt when scontrol did not answer this time: ask again
    ASSERT_FALSE(job && is_final(job->front().state))
        << "the job ended before any result appeared: nothing to interrupt\n" << describe(*job) << diagnostics(log);
    running_with_results = job && job->front().state == "RUNNING" && line_count(jsonl) >= kSignalAfterLines;
    if (!running_with_results) std::this_thread::sleep_for(kPollInterval);
  }
  ASSERT_TRUE(running_with_results) << "no result appeared within " << kJobLimitS << " s\n" << diagnostics(log);
  const auto signal = run_shell("timeout " + std::to_string(kClientLimitS) + " scancel --signal=USR1 --batch " + id);
  ASSERT_EQ(signal.exit_code, 0) << "scancel --signal=USR1 --batch " << id << ":\n" << signal.output;

  const auto end = wait_for_job_end(id, kRequeuedJobLimitS);
  ASSERT_TRUE(end.has_value()) << "job " << id << " did not end within " << kRequeuedJobLimitS << " s of the signal\n"
                               << diagnostics(log);
  const JobRecord& job = end->front();
  EXPECT_EQ(job.state, "COMPLETED") << describe(*end) << diagnostics(log);
  EXPECT_EQ(job.exit_code, "0:0") << describe(*end) << diagnostics(log);
  ASSERT_EQ(job.restarts, 1) << "expected one requeue (the signal came too late if 0)\n" << describe(*end)
                             << diagnostics(log);

  // The log (--open-mode=append: both runs) tells the story: the signal, the drain, the requeue, the resume.
  const std::string text = read_or_empty(log);
  EXPECT_NE(text.find("glacier_step: pre-timeout signal"), std::string::npos) << text;
  EXPECT_NE(text.find("requeueing job " + id + " (restart 1)"), std::string::npos) << text;
  std::smatch m;
  const std::regex stopped("stopped by SIGUSR1 after (\\d+) of " +
                           std::to_string(kRequeuePromptCount) + " prompts");
  ASSERT_TRUE(std::regex_search(text, m, stopped)) << "expected glacier_mpi's drain message in the log\n" << text;
  const int finished_first = std::stoi(m[1].str());
  EXPECT_GT(finished_first, 0) << "no result was saved before the stop";
  EXPECT_LT(finished_first, kRequeuePromptCount) << "the signal came too late to test resuming";
  EXPECT_NE(text.find("resuming " + out + ": " + std::to_string(finished_first) + " of " +
                      std::to_string(kRequeuePromptCount) + " prompts already finished"),
            std::string::npos)
      << "the requeued run should resume from the " << finished_first << " saved results\n" << text;
  std::printf("SIGUSR1 stopped the first run after %d of %d prompts\n", finished_first, kRequeuePromptCount);

  const auto results = glacier::io::read_finished(out);
  EXPECT_EQ(std::get<int64_t>(results.attributes.at("resumes")), 1);
  glacier::testing::expect_same_results(results.rows, want, out);
  // The resumed run rewrites the JSONL whole, in input order: byte for byte the uninterrupted run's.
  EXPECT_TRUE(read_or_empty(jsonl) == read_or_empty(ref_jsonl)) << jsonl << " differs from " << ref_jsonl;
}

}  // namespace
