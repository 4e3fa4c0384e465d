// A job whose results outgrow their disk (a small tmpfs mounted as the --out directory) ends with exit 1
// and one message naming the file and the full disk, leaves every flushed row readable, and --resume from
// the file moved to a real disk completes the job with the uninterrupted run's results.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/job.h"
#include "app/result_sink.h"
#include "common/h5py_check.h"
#include "common/job_runner.h"
#include "common/process.h"
#include "common/results_match.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"

namespace {

namespace fs = std::filesystem;
using glacier::testing::run_glacier;

constexpr int kRanks = 2;
// Rows of 48 tokens take about 1 KiB each in the file; the disk below holds a little over 400 of them,
// so about half of the job's results fit.
constexpr int kPromptCount = 800;
constexpr int kMaxTokens = 48;
constexpr int kFlushEvery = 8;
// The space check refuses a flush that would leave less than ResultSink::kSpaceMargin (8 MiB) free, so a
// disk of just that size refuses the first one; this much more lets several hundred rows reach the file
// first. (With 256 KiB more only 64 fit: HDF5 grows the file in bursts, not row by row.)
constexpr uint64_t kRoomForRows = uint64_t{512} << 10;
constexpr uint64_t kDiskBytes = glacier::app::ResultSink::kSpaceMargin + kRoomForRows;
// Each run takes a few seconds here; the limit only stops a hung one.
constexpr int kJobLimitS = 90;

// A tmpfs of `bytes` mounted at `dir` for the life of this object. The mount is made in a mount namespace
// of this test process's own (when the kernel allows one), so that even a test killed outright leaves
// no mount behind: the namespace, and the mount with it, goes when its last process does.
class TmpfsMount {
 public:
  TmpfsMount(const std::string& dir, uint64_t bytes) : dir_(dir) {
    fs::create_directories(dir);
    if (::unshare(CLONE_NEWNS) == 0) {
      // Mounts are shared with the parent namespace by default (systemd): made private, ours stay here.
      private_namespace_ = ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
    }
    const std::string options = "size=" + std::to_string(bytes) + ",mode=0755";
    if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
      error_ = errno;
      return;
    }
    mounted_ = true;
  }
  ~TmpfsMount() {
    std::string why;
    if (mounted_ && !unmount(&why)) ADD_FAILURE() << why;
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  bool mounted() const { return mounted_; }
  // Why the mount failed: EPERM/EACCES (no CAP_SYS_ADMIN) and ENODEV (no tmpfs) mean "not here".
  int error() const { return error_; }
  bool not_permitted() const { return error_ == EPERM || error_ == EACCES || error_ == ENODEV; }
  std::string where() const { return private_namespace_ ? "a private mount namespace" : "the machine's mount namespace"; }

  // Unmounts now; a mount still busy (a process left holding a file there) is detached instead, and
  // that is reported as a failure.
  bool unmount(std::string* why) {
    if (!mounted_) return true;
    mounted_ = false;
    if (::umount2(dir_.c_str(), 0) == 0) return true;
    *why = "umount " + dir_ + ": " + std::strerror(errno) + " (detached instead)";
    ::umount2(dir_.c_str(), MNT_DETACH);
    return false;
  }

 private:
  std::string dir_;
  bool mounted_ = false;
  bool private_namespace_ = false;
  int error_ = 0;
};

std::string write_prompts(const std::string& dir) {
  static const char* const subjects[] = {"a little cat", "the old dog", "a small girl", "Tom", "Lily",
                                         "a big bear", "the king", "a happy bird", "Ben", "Sue and her mom", "the boy"};
  static const char* const actions[] = {"went to the park", "found a box", "wanted to play", "was very sad",
                                        "saw a tall tree", "had a new toy", "liked to sing", "ran very fast"};
  const std::string path = dir + "/prompts.jsonl";
  std::ofstream out(path);
  for (int i = 0; i < kPromptCount; ++i) {
    std::string id = "d";  // built with += (GCC 12 warns falsely on "d" + std::to_string(i))
    id += std::to_string(i);
    const nlohmann::json line = {
        {"id", id}, {"prompt", std::string(subjects[i % std::size(subjects)]) + " " + actions[i % std::size(actions)]}};
    out << line.dump() << "\n";
  }
  return path;
}

// --flush-seconds far beyond a run's length: every flush is a count flush, so the file as the full disk
// left it holds a whole number of --flush-every rows.
std::string job_args(const std::string& model, const std::string& prompts, const std::string& out) {
  return "--model " + model + " --prompts " + prompts + " --out " + out + " --max-tokens " + std::to_string(kMaxTokens) +
         " --flush-every " + std::to_string(kFlushEvery) + " --flush-seconds 600 --bind none";
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

TEST(FullDisk, JobEndsWithOneMessageKeepsFlushedRowsAndResumesOnARealDisk) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("full-disk");
  const std::string prompts = write_prompts(dir);

  TmpfsMount disk(dir + "/disk", kDiskBytes);
  if (!disk.mounted() && disk.not_permitted())
    GTEST_SKIP() << "full-disk test skipped: mounting a tmpfs is not permitted here (mount: "
                 << std::strerror(disk.error()) << "; needs root with CAP_SYS_ADMIN)";
  ASSERT_TRUE(disk.mounted()) << "mount -t tmpfs at " << dir << "/disk: " << std::strerror(disk.error());
  std::printf("a %llu KiB tmpfs in %s\n", static_cast<unsigned long long>(kDiskBytes >> 10), disk.where().c_str());

  // The uninterrupted run, on a real disk.
  const std::string reference_h5 = dir + "/reference.h5";
  const auto reference = run_glacier(kRanks, job_args(model, prompts, reference_h5), kJobLimitS);
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const auto want = glacier::testing::rows_by_id(glacier::io::read_finished(reference_h5).rows, reference_h5);
  ASSERT_EQ(want.size(), size_t{kPromptCount});

  const std::string full_h5 = dir + "/disk/results.h5";
  const auto run = run_glacier(kRanks, job_args(model, prompts, full_h5), kJobLimitS);
  EXPECT_EQ(run.exit_code, glacier::app::kExitFailure) << run.output;
  // One message, from rank 0, naming the file and the cause; every rank then ends cleanly.
  EXPECT_EQ(occurrences(run.output, "cannot write results to " + full_h5 + ": the disk is (nearly) full"), 1u)
      << run.output;
  EXPECT_EQ(occurrences(run.output, "error:"), 1u) << "expected one error message\n" << run.output;
  for (const char* crash : {"Segmentation fault", "core dumped", "terminate called", "Aborted", "MPI_ABORT",
                            "exited on signal", "Process received signal", "assertion"})
    EXPECT_EQ(run.output.find(crash), std::string::npos) << "crash text '" << crash << "'\n" << run.output;

  // The file as the full disk left it: whole flushes, each row the uninterrupted run's.
  const auto left = glacier::io::read_finished(full_h5);
  EXPECT_GT(left.rows.size(), 0u) << "no row reached the disk before it was full";
  EXPECT_LT(left.rows.size(), size_t{kPromptCount}) << "every result fit on the " << (kDiskBytes >> 10) << " KiB disk";
  EXPECT_EQ(left.rows.size() % kFlushEvery, 0u) << "only whole flushes of --flush-every rows may be on disk";
  glacier::testing::expect_rows_match(left.rows, want, "on the full disk " + full_h5);
  glacier::testing::expect_h5py_row_count(full_h5, left.rows.size());
  std::printf("the full disk kept %zu of %d rows\n", left.rows.size(), kPromptCount);

  // Moved to a real disk (a copy: another file system), the file is resumed there.
  const std::string moved_h5 = dir + "/results.h5";
  fs::copy_file(full_h5, moved_h5);
  fs::remove(full_h5);
  std::string why;
  EXPECT_TRUE(disk.unmount(&why)) << why;
  const auto resumed = run_glacier(kRanks, job_args(model, prompts, moved_h5) + " --resume", kJobLimitS);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto finished = glacier::io::read_finished(moved_h5);
  glacier::testing::expect_same_results(finished.rows, want, "resumed " + moved_h5);
  EXPECT_EQ(std::get<int64_t>(finished.attributes.at("resumes")), 1);
}

}  // namespace
