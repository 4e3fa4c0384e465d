// BackgroundProcess: fork/exec into a new process group with output to a file, signalling, waiting
// with a deadline, and killing a whole process tree found through /proc.
#include "common/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/test_env.h"

namespace glacier::testing {
namespace {

std::vector<std::string> split_on_spaces(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// The parent pid in /proc/PID/stat: the field after the command name, which may itself hold spaces
// and parentheses, so the scan starts after the last ')'.
std::optional<pid_t> parent_of(const std::string& pid_dir) {
  std::ifstream in("/proc/" + pid_dir + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 1));
  char state = 0;
  pid_t ppid = 0;
  if (!(rest >> state >> ppid)) return std::nullopt;
  return ppid;
}

}  // namespace

BackgroundProcess::BackgroundProcess(const std::vector<std::string>& argv, const std::string& output_path)
    : output_path_(output_path) {
  if (argv.empty()) throw std::invalid_argument("BackgroundProcess: empty argv");
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls are allowed.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int out_fd = ::open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0) throw std::runtime_error("cannot create " + output_path + ": " + std::strerror(errno));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(out_fd, 2);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(out_fd);
  if (null_fd >= 0) ::close(null_fd);
  if (pid_ < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(fork_errno));
  ::setpgid(pid_, pid_);  // also here: a signal sent right after the constructor must find the group
}

BackgroundProcess::~BackgroundProcess() {
  if (pid_ > 0 && !exit_code_) kill_tree();
}

void BackgroundProcess::signal(int signal_number) const {
  if (pid_ > 0 && !exit_code_) ::kill(pid_, signal_number);
}

void BackgroundProcess::kill_tree() {
  if (pid_ <= 0) return;
  const std::vector<pid_t> tree = descendants_of(pid_);
  if (!exit_code_) ::kill(-pid_, SIGKILL);
  for (pid_t p : tree) ::kill(p, SIGKILL);
  if (!exit_code_) {
    int status = 0;
    if (::waitpid(pid_, &status, 0) == pid_) exit_code_ = exit_code_of(status);
  }
}

std::optional<int> BackgroundProcess::wait_for(double seconds) {
  if (exit_code_) return exit_code_;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = exit_code_of(status);
      return exit_code_;
    }
    if (r < 0 && errno != EINTR) return std::nullopt;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool BackgroundProcess::running() { return !wait_for(0.0).has_value(); }

std::string BackgroundProcess::output() const {
  try {
    return read_text(output_path_);
  } catch (const std::exception&) {
    return "";
  }
}

bool is_alive(pid_t pid) {
  // The main thread can be a zombie while other threads still exit and hold the process's files (and
  // their locks): the process is gone only when every thread is.
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(tasks.c_str());
  if (!dir) return false;
  bool alive = false;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream in(tasks + "/" + e->d_name + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    const size_t close = stat.rfind(')');
    const char state = close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : 'X';
    if (state != 'Z' && state != 'X') alive = true;
  }
  ::closedir(dir);
  return alive;
}

std::vector<pid_t> descendants_of(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  if (DIR* proc = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(proc)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      if (auto ppid = parent_of(e->d_name)) children.emplace(*ppid, static_cast<pid_t>(std::stol(e->d_name)));
    }
    ::closedir(proc);
  }
  std::vector<pid_t> found;
  std::vector<pid_t> frontier{root};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      found.push_back(it->second);
      frontier.push_back(it->second);
    }
  }
  return found;
}

ShellResult run_shell(const std::string& command) {
  ShellResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) {
    result.output = std::string("popen failed: ") + std::strerror(errno);
    return result;
  }
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) result.output.append(buf, n);
  const int status = ::pclose(pipe);
  result.exit_code = status < 0 ? -1 : exit_code_of(status);
  return result;
}

std::vector<std::string> glacier_argv(int np, const std::string& args) {
  std::vector<std::string> argv{GLACIER_MPIEXEC, "-np", std::to_string(np)};
  for (std::string& w : split_on_spaces(GLACIER_MPIEXEC_FLAGS)) argv.push_back(std::move(w));
  argv.push_back(std::string(GLACIER_BUILD_DIR) + "/glacier_mpi");
  for (std::string& w : split_on_spaces(args)) argv.push_back(std::move(w));
  return argv;
}

bool kill_and_wait_gone(const std::vector<pid_t>& pids, double seconds) {
  for (pid_t p : pids) ::kill(p, SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    bool any = false;
    for (pid_t p : pids) any = any || is_alive(p);
    if (!any) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace glacier::testing

namespace glacier::testing {

std::optional<pid_t> pid_of_mpi_rank(pid_t launcher, int rank) {
  std::string wanted = "OMPI_COMM_WORLD_RANK=";  // built with += (GCC 12 warns falsely on "..." + to_string)
  wanted += std::to_string(rank);
  for (pid_t pid : descendants_of(launcher)) {
    const std::string environ = read_text("/proc/" + std::to_string(pid) + "/environ");
    size_t at = 0;
    for (size_t end; (end = environ.find('\0', at)) != std::string::npos; at = end + 1)
      if (environ.compare(at, end - at, wanted) == 0) return pid;
  }
  return std::nullopt;
}

}  // namespace glacier::testing
