// Output paths checked against inputs, and the one-writer lock on each output file.
#include "app/output_guard.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "util/error.h"
#include "util/log.h"

namespace glacier::app {
namespace {

namespace fs = std::filesystem;

// How often a lock is retried when its sidecar was replaced between our open and our flock (a holder
// that just finished unlinks it); more than a couple of such races in a row means something is wrong.
constexpr int kLockAttempts = 8;

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

std::string holder_of(int fd) {
  char buf[512] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string text = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text.empty() ? "a process that has not yet written its name" : text;
}

bool lock_unsupported(int error) { return error == ENOLCK || error == EOPNOTSUPP || error == ENOSYS || error == EINVAL; }

}  // namespace

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  const bool a_exists = ::stat(a.c_str(), &sa) == 0, b_exists = ::stat(b.c_str(), &sb) == 0;
  if (a_exists && b_exists) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  std::error_code ec_a, ec_b;
  const fs::path pa = fs::weakly_canonical(fs::absolute(a), ec_a);
  const fs::path pb = fs::weakly_canonical(fs::absolute(b), ec_b);
  if (ec_a || ec_b) return fs::absolute(a).lexically_normal() == fs::absolute(b).lexically_normal();
  return pa == pb;
}

void check_outputs_apart_from_inputs(const JobOptions& o) {
  const std::string draft_model = draft_model_path(o);
  const std::pair<const char*, const std::string*> inputs[] = {
      {"--model", &o.model},          {"--prompts", &o.prompts},
      {"--config", &o.config_file},   {"--partition-from", &o.partition_from},
      {"--speculate draft:", &draft_model}};
  const std::pair<const char*, const std::string*> outputs[] = {{"--out", &o.h5_out}, {"--jsonl", &o.jsonl_out}};
  for (const auto& [out_name, out_path] : outputs) {
    if (out_path->empty()) continue;
    for (const auto& [in_name, in_path] : inputs) {
      if (in_path->empty() || !same_file(*out_path, *in_path)) continue;
      throw InputError(std::string(out_name) + ": expected an output file apart from every input, found '" + *out_path +
                       "' naming the same file as " + in_name + " '" + *in_path +
                       "' (writing there would destroy the input); choose another path");
    }
    const std::string sidecar = OutputLock::sidecar_for(*out_path);
    for (const auto& [in_name, in_path] : inputs) {
      if (in_path->empty() || !same_file(sidecar, *in_path)) continue;
      throw InputError(std::string(out_name) + ": its lock file '" + sidecar + "' would overwrite the " + in_name +
                       " input '" + *in_path + "'; choose another output path");
    }
  }
  if (!o.h5_out.empty() && !o.jsonl_out.empty() && same_file(o.h5_out, o.jsonl_out))
    throw InputError("--out and --jsonl: expected two different files, found both naming " + o.h5_out);
}

OutputLock::OutputLock(const std::string& output_path) : sidecar_(sidecar_for(output_path)) {
  for (int attempt = 0; attempt < kLockAttempts; ++attempt) {
    const int fd = ::open(sidecar_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      throw InputError("output file " + output_path + ": cannot create its lock file " + sidecar_ + ": " +
                       std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      if (lock_unsupported(error)) {
        GLACIER_LOG_WARN("output file %s: the file system does not support locks (%s): a second job writing the same "
                         "file would not be refused",
                         output_path.c_str(), std::strerror(error));
        fd_ = fd;
        return;
      }
      const std::string holder = error == EWOULDBLOCK ? holder_of(fd) : std::string(std::strerror(error));
      ::close(fd);
      throw InputError("output file " + output_path + ": expected no other job writing it, found it locked by " + holder +
                       " (lock file " + sidecar_ + "); wait for that job, or choose another output path");
    }
    // A holder that just finished unlinks the sidecar after we opened it: our lock is then on a file
    // nobody else will see, so check that the path still names what we locked.
    struct stat locked {}, named {};
    if (::fstat(fd, &locked) == 0 && ::stat(sidecar_.c_str(), &named) == 0 && locked.st_dev == named.st_dev &&
        locked.st_ino == named.st_ino) {
      const std::string me = "host " + this_host() + ", pid " + std::to_string(::getpid()) + "\n";
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size()))
        GLACIER_LOG_WARN("lock file %s: cannot record the holder (%s)", sidecar_.c_str(), std::strerror(errno));
      fd_ = fd;
      return;
    }
    ::close(fd);
  }
  throw InputError("output file " + output_path + ": its lock file " + sidecar_ + " kept being replaced while locking (" +
                   std::to_string(kLockAttempts) + " attempts): is another job starting and stopping on it?");
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  // Unlink while still holding the lock: a job that opened the old sidecar meanwhile sees it replaced
  // (the check above) and locks a fresh one.
  ::unlink(sidecar_.c_str());
  ::close(fd_);
}

std::vector<std::unique_ptr<OutputLock>> lock_outputs(const JobOptions& o) {
  std::vector<std::unique_ptr<OutputLock>> locks;
  if (!o.h5_out.empty()) locks.push_back(std::make_unique<OutputLock>(o.h5_out));
  if (!o.jsonl_out.empty()) locks.push_back(std::make_unique<OutputLock>(o.jsonl_out));
  return locks;
}

}  // namespace glacier::app
