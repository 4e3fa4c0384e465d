// Stop signals: SIGUSR1, SIGTERM, SIGINT and SIGHUP set the flag instead of killing the process, the first signal is
// the one reported, and a real kill from another process reaches the handler.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "app/signals.h"

namespace glacier::app {
namespace {

class AppSignals : public ::testing::Test {
 protected:
  void SetUp() override {
    install_stop_signals();
    clear_stop_request();
  }
  void TearDown() override { clear_stop_request(); }
};

TEST_F(AppSignals, NothingRequestedAtFirst) {
  EXPECT_FALSE(stop_requested());
  EXPECT_EQ(stop_signal(), 0);
}

TEST_F(AppSignals, Sigusr1SetsTheFlag) {
  ASSERT_EQ(std::raise(SIGUSR1), 0);  // synchronous in a single-threaded process: the handler has run
  EXPECT_TRUE(stop_requested());
  EXPECT_EQ(stop_signal(), SIGUSR1);
}

TEST_F(AppSignals, SigtermSetsTheFlagAndTheFirstSignalStays) {
  ASSERT_EQ(std::raise(SIGTERM), 0);
  ASSERT_EQ(std::raise(SIGUSR1), 0);
  ASSERT_EQ(std::raise(SIGTERM), 0);  // a repeated SIGTERM must not kill a draining job
  EXPECT_TRUE(stop_requested());
  EXPECT_EQ(stop_signal(), SIGTERM);
  clear_stop_request();
  EXPECT_FALSE(stop_requested());
}

TEST_F(AppSignals, SigintAndSighupAreStopRequestsToo) {
  ASSERT_EQ(std::raise(SIGINT), 0);  // a terminal's Ctrl-C, a lost session: drain, do not die
  EXPECT_EQ(stop_signal(), SIGINT);
  EXPECT_EQ(describe_stop(), "SIGINT");
  clear_stop_request();
  ASSERT_EQ(std::raise(SIGHUP), 0);
  EXPECT_EQ(stop_signal(), SIGHUP);
}

TEST_F(AppSignals, KillFromAnotherProcessIsSeen) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child waits for the parent's SIGTERM and exits 0 only if the handler caught it.
    for (int i = 0; i < 1000 && !stop_requested(); ++i) usleep(10000);
    _exit(stop_signal() == SIGTERM ? 0 : 1);
  }
  ASSERT_EQ(kill(child, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of the signal instead of handling it";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace glacier::app
