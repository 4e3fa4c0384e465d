// A child process started with fork/exec in its own process group, so that a test can signal it while
// it runs, kill it with everything it started, and read its exit status and combined output.
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace glacier::testing {

class BackgroundProcess {
 public:
  // Starts argv[0] (looked up in PATH) with stdout and stderr both written to output_path.
  // Throws std::runtime_error when fork fails; an exec failure shows as exit code 127.
  BackgroundProcess(const std::vector<std::string>& argv, const std::string& output_path);
  // Kills whatever is still running (the group and every descendant) and reaps the child.
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Sends `signal_number` to the child alone (not its group): mpiexec forwards what it should.
  void signal(int signal_number) const;
  // SIGKILL to the child's group and to every process descended from it, found before the first kill
  // so that none escapes by being reparented. Then reaps the child.
  void kill_tree();
  // Waits up to `seconds` for the child; its exit code (128 + signal number when a signal ended it),
  // or nullopt when it is still running.
  std::optional<int> wait_for(double seconds);
  bool running();
  // Every output byte so far.
  std::string output() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string output_path_;
};

// True while any thread of process `pid` runs (a zombie waiting to be reaped holds no files).
bool is_alive(pid_t pid);

// Process ids of every live descendant of `root` (children, their children, ...), from /proc.
std::vector<pid_t> descendants_of(pid_t root);
// The pid of MPI rank `rank` among the descendants of `launcher` (Open MPI puts the rank in each
// process's environment), or nullopt when none has it (yet).
std::optional<pid_t> pid_of_mpi_rank(pid_t launcher, int rank);
// SIGKILLs each process still alive and waits (at most `seconds`) until every one is gone, its files and
// their locks released; false when one outlived the wait. For ranks a launcher left behind when it exited.
bool kill_and_wait_gone(const std::vector<pid_t>& pids, double seconds);

// `sh -c COMMAND`, stdout and stderr read together until it ends: its exit code (128 + the signal number
// when a signal ended it, -1 when it could not be started) and its output.
struct ShellResult {
  int exit_code = -1;
  std::string output;
};
ShellResult run_shell(const std::string& command);

// argv for `mpiexec -np NP <flags> build/glacier_mpi ARGS`; ARGS is split on spaces, so its paths must
// not contain any.
std::vector<std::string> glacier_argv(int np, const std::string& args);

}  // namespace glacier::testing
