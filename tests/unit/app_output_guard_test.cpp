// The one-writer lock on an output file: a second holder (another process, or another open file in
// this one) is refused with the first holder's host and pid; the lock ends with its holder, even a
// killed one; a replaced sidecar is never trusted.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "app/output_guard.h"
#include "common/input_error.h"
#include "common/test_env.h"
#include "util/error.h"

namespace glacier::app {
namespace {

namespace fs = std::filesystem;

std::string refusal(const std::string& output) {
  return glacier::testing::refusal_message([&] { OutputLock second(output); });
}

TEST(AppOutputGuard, ASecondLockIsRefusedNamingTheHolder) {
  const std::string dir = glacier::testing::scratch_dir("guard_lock");
  const std::string out = dir + "/r.h5";
  {
    OutputLock first(out);
    EXPECT_EQ(first.sidecar(), out + ".lock");
    const std::string holder = glacier::testing::read_text(first.sidecar());
    EXPECT_NE(holder.find("pid " + std::to_string(::getpid())), std::string::npos) << holder;
    const std::string message = refusal(out);
    EXPECT_NE(message.find("locked by host"), std::string::npos) << message;
    EXPECT_NE(message.find("pid " + std::to_string(::getpid())), std::string::npos) << message;
    EXPECT_NE(message.find(out + ".lock"), std::string::npos) << message;
  }
  EXPECT_FALSE(fs::exists(out + ".lock")) << "a released lock removes its sidecar";
  EXPECT_EQ(refusal(out), "") << "the lock must be free again once its holder is gone";
}

TEST(AppOutputGuard, ALockHeldByAnotherProcessIsRefusedAndDiesWithIt) {
  const std::string dir = glacier::testing::scratch_dir("guard_process");
  const std::string out = dir + "/r.jsonl";
  int ready[2], release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    OutputLock held(out);
    (void)!::write(ready[1], "r", 1);
    char c;
    (void)!::read(release[0], &c, 1);
    _exit(0);  // no destructor runs: the sidecar stays, as after a crash, but the lock dies with us
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  const std::string message = refusal(out);
  EXPECT_NE(message.find("pid " + std::to_string(child)), std::string::npos) << message;
  (void)!::write(release[1], "x", 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(fs::exists(out + ".lock")) << "the crashed holder's sidecar is left behind";
  EXPECT_EQ(refusal(out), "") << "a leftover sidecar of a dead holder must not block the next job";
}

TEST(AppOutputGuard, JobOptionsLockEveryOutput) {
  const std::string dir = glacier::testing::scratch_dir("guard_options");
  JobOptions o;
  o.h5_out = dir + "/r.h5";
  o.jsonl_out = dir + "/r.jsonl";
  const auto locks = lock_outputs(o);
  ASSERT_EQ(locks.size(), 2u);
  EXPECT_NE(refusal(o.h5_out), "");
  EXPECT_NE(refusal(o.jsonl_out), "");
}

TEST(AppOutputGuard, SameFileSeesLinksAndPathsNotYetCreated) {
  const std::string dir = glacier::testing::scratch_dir("guard_same");
  std::ofstream(dir + "/a") << "x";
  fs::remove(dir + "/sym");
  fs::remove(dir + "/hard");
  fs::create_symlink(dir + "/a", dir + "/sym");
  fs::create_hard_link(dir + "/a", dir + "/hard");
  EXPECT_TRUE(same_file(dir + "/a", dir + "/sym"));
  EXPECT_TRUE(same_file(dir + "/a", dir + "/hard"));
  EXPECT_TRUE(same_file(dir + "/new.h5", dir + "/./sub/../new.h5"));
  EXPECT_FALSE(same_file(dir + "/a", dir + "/new.h5"));
}

}  // namespace
}  // namespace glacier::app
