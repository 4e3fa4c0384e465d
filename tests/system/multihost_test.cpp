// The stories260K job on 4 hosts (network namespaces joined by a bridge, one rank a host, MPI over TCP)
// gives bitwise the tokens and log-probs of one rank on one host; and tests/system/netns_hosts.sh leaves
// nothing behind, whether its run ends, is signalled, or is killed outright.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "common/job_runner.h"
#include "common/process.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"

using glacier::testing::BackgroundProcess;
using glacier::testing::read_jsonl;
using glacier::testing::scratch_dir;

namespace {

const std::string kHostsScript = std::string(GLACIER_SOURCE_DIR) + "/tests/system/netns_hosts.sh";
const std::string kPrompts = std::string(GLACIER_SOURCE_DIR) + "/tests/data/stories_prompts.jsonl";
constexpr int kHosts = 4;
constexpr size_t kPromptCount = 27;  // lines of tests/data/stories_prompts.jsonl
// Making the hosts takes about 1 s and the job about 4 s (mpirun start-up dominates); the limit leaves
// room for a loaded machine but ends a hung job well inside ctest's own timeout.
constexpr double kRunLimitSeconds = 180;
// How long a signalled or killed run may take to disappear (its trap waits 0.5 s for mpirun).
constexpr double kCleanupLimitSeconds = 30;
constexpr int kSkipExitCode = 77;  // netns_hosts.sh check: namespaces cannot be made here

using Outputs = glacier::testing::GeneratedById;
Outputs read_outputs(const std::string& jsonl) { return glacier::testing::read_generated(jsonl); }

// Output of `command` (stdout and stderr) and its exit code.
std::pair<int, std::string> shell(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

// Namespaces of the set a `netns_hosts.sh run` with this PID makes (named glacier-r<PID>-...).
std::vector<std::string> namespaces_of_run(pid_t script_pid) {
  const std::string prefix = "glacier-r" + std::to_string(script_pid) + "-";
  std::vector<std::string> found;
  std::istringstream lines(shell("ip netns list").second);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with(prefix)) found.push_back(line.substr(0, line.find(' ')));
  return found;
}

bool file_exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Skips unless this machine can make network namespaces (root, iproute2, the capability).
#define REQUIRE_NETNS()                                                                           \
  do {                                                                                            \
    auto [code, why] = shell("bash " + kHostsScript + " check");                                  \
    if (code == kSkipExitCode) GTEST_SKIP() << "multi-host test skipped: " << why;                \
    ASSERT_EQ(code, 0) << why;                                                                    \
  } while (0)

// Starts `netns_hosts.sh run -np 4 ARGS` in the background; its PID names the hosts it makes.
std::unique_ptr<BackgroundProcess> start_hosts_run(const std::vector<std::string>& mpirun_args, const std::string& log) {
  std::vector<std::string> argv{"bash", kHostsScript, "run", "-np", std::to_string(kHosts)};
  argv.insert(argv.end(), mpirun_args.begin(), mpirun_args.end());
  return std::make_unique<BackgroundProcess>(argv, log);
}

// Waits until the run's last host has a process in it (mpirun has launched there), or the limit.
bool wait_until_job_on_every_host(pid_t script_pid, double seconds) {
  const std::string last_host = "glacier-r" + std::to_string(script_pid) + "-h" + std::to_string(kHosts - 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    auto [code, pids] = shell("ip netns pids " + last_host);
    if (code == 0 && pids.find_first_of("0123456789") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// A `sleep 600` run on every host, for the tests of how a run ends: the run, its script's PID (which names
// its hosts) and the processes it started; no run, with the failure recorded, when a host never got its job.
struct SleepingRun {
  std::unique_ptr<BackgroundProcess> run;
  pid_t script_pid = 0;
  std::vector<pid_t> started;
};

SleepingRun start_sleep_on_every_host(const std::string& scratch_name) {
  SleepingRun s;
  s.run = start_hosts_run({"sleep", "600"}, scratch_dir(scratch_name) + "/run.log");
  s.script_pid = s.run->pid();
  if (!wait_until_job_on_every_host(s.script_pid, kRunLimitSeconds)) {
    ADD_FAILURE() << "not every host had the job within " << kRunLimitSeconds << " s\n" << s.run->output();
    s.run.reset();
    return s;
  }
  s.started = glacier::testing::descendants_of(s.script_pid);
  return s;
}

TEST(MultiHost, FourHostsOverTcpMatchOneRankBitwise) {
  REQUIRE_NETNS();
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = scratch_dir("multihost");
  const std::string common = "--model " + model + " --prompts " + kPrompts + " --max-tokens 64 --bind none";

  auto single = glacier::testing::run_glacier(1, common + " --jsonl " + dir + "/np1.jsonl");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const Outputs baseline = read_outputs(dir + "/np1.jsonl");
  ASSERT_EQ(baseline.tokens.size(), kPromptCount);

  // Every word of `common` is one argument: no path here holds a space.
  std::vector<std::string> job{std::string(GLACIER_BUILD_DIR) + "/glacier_mpi"};
  std::istringstream words(common + " --jsonl " + dir + "/hosts.jsonl --out " + dir + "/hosts.h5");
  for (std::string w; words >> w;) job.push_back(w);
  auto run = start_hosts_run(job, dir + "/hosts.log");
  const pid_t script_pid = run->pid();
  const auto code = run->wait_for(kRunLimitSeconds);
  ASSERT_TRUE(code.has_value()) << "the 4-host job did not end within " << kRunLimitSeconds << " s:\n" << run->output();
  ASSERT_EQ(*code, 0) << run->output();
  EXPECT_TRUE(namespaces_of_run(script_pid).empty()) << "the run left its namespaces behind";

  const Outputs hosts = read_outputs(dir + "/hosts.jsonl");
  EXPECT_EQ(hosts.tokens, baseline.tokens);
  EXPECT_EQ(hosts.logprob_bits, baseline.logprob_bits);
  // The ranks really ran on four different hosts, one stage each.
  const auto results = glacier::io::read_finished(dir + "/hosts.h5");
  EXPECT_EQ(std::get<std::string>(results.attributes.at("hosts")), "h0,h1,h2,h3");
  EXPECT_EQ(std::get<int64_t>(results.attributes.at("ranks")), kHosts);
  EXPECT_EQ(results.rows.size(), kPromptCount);
}

// A run ended by SIGTERM (as timeout(1) or ctest ends it) stops its job and removes its hosts.
TEST(MultiHost, SignalledRunRemovesItsHostsAndProcesses) {
  REQUIRE_NETNS();
  const auto [run, script_pid, started] = start_sleep_on_every_host("multihost_signal");
  if (!run) return;  // the failure is recorded
  run->signal(SIGTERM);
  const auto code = run->wait_for(kCleanupLimitSeconds);
  ASSERT_TRUE(code.has_value()) << "the run did not end after SIGTERM:\n" << run->output();
  EXPECT_EQ(*code, 143) << run->output();  // 128 + SIGTERM: the trap exits as the signal would
  EXPECT_TRUE(namespaces_of_run(script_pid).empty());
  EXPECT_FALSE(file_exists("/etc/netns/glacier-r" + std::to_string(script_pid) + "-h0"));
  for (pid_t p : started) EXPECT_FALSE(glacier::testing::is_alive(p)) << "process " << p << " outlived the run";
}

// A run killed outright (no trap runs) leaves its hosts; the next run, or clean-stale, removes them and
// the processes still inside.
TEST(MultiHost, HostsOfAKilledRunAreRemovedAsStale) {
  REQUIRE_NETNS();
  const auto [run, script_pid, started] = start_sleep_on_every_host("multihost_kill");
  if (!run) return;  // the failure is recorded
  run->signal(SIGKILL);  // the script alone: its children live on inside the namespaces
  ASSERT_TRUE(run->wait_for(kCleanupLimitSeconds).has_value());
  ASSERT_EQ(namespaces_of_run(script_pid).size(), static_cast<size_t>(kHosts + 1)) << "hosts plus the bridge";

  auto [code, out] = shell("bash " + kHostsScript + " clean-stale");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("removing stale hosts r" + std::to_string(script_pid)), std::string::npos) << out;
  EXPECT_TRUE(namespaces_of_run(script_pid).empty());
  for (pid_t p : started) {
    // A killed process is gone once its parent (or init, for the orphans) has reaped it.
    for (int i = 0; i < 100 && glacier::testing::is_alive(p); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(glacier::testing::is_alive(p)) << "process " << p << " outlived clean-stale";
  }
}

}  // namespace
