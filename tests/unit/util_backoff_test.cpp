// The polling back-off (util/backoff.h): the waits each policy takes, and the count that the MPI
// channel's stall watchdog is paced by.
#include <gtest/gtest.h>

#include "util/backoff.h"

namespace {

using glacier::Backoff;
using std::chrono::microseconds;
namespace backoff = glacier::backoff;

TEST(Backoff, MessageWaitsYieldFirstThenSleepUpTo200Microseconds) {
  for (int64_t k = 1; k < 64; ++k) EXPECT_EQ(Backoff::delay(backoff::kMessage, k), microseconds(0)) << k;
  EXPECT_EQ(Backoff::delay(backoff::kMessage, 64), microseconds(64));
  EXPECT_EQ(Backoff::delay(backoff::kMessage, 150), microseconds(150));
  EXPECT_EQ(Backoff::delay(backoff::kMessage, 201), microseconds(200));
  EXPECT_EQ(Backoff::delay(backoff::kMessage, 1'000'000), microseconds(200));
}

TEST(Backoff, CollectiveWaitsGrowByTenMicrosecondsToOneMillisecond) {
  EXPECT_EQ(Backoff::delay(backoff::kCollective, 1), microseconds(10));
  EXPECT_EQ(Backoff::delay(backoff::kCollective, 50), microseconds(500));
  EXPECT_EQ(Backoff::delay(backoff::kCollective, 100), microseconds(1000));
  EXPECT_EQ(Backoff::delay(backoff::kCollective, 5000), microseconds(1000));
}

TEST(Backoff, IdlePollsWaitAFixedTime) {
  for (int64_t k : {1, 2, 1000}) {
    EXPECT_EQ(Backoff::delay(backoff::kIdleCoordinator, k), microseconds(200));
    EXPECT_EQ(Backoff::delay(backoff::kIdleDriver, k), microseconds(1000));
  }
}

TEST(Backoff, PausesAreCountedUntilReset) {
  Backoff b(backoff::kMessage);  // the first pauses only yield
  for (int i = 0; i < 3; ++i) b.pause();
  EXPECT_EQ(b.pauses(), 3);
  b.reset();
  EXPECT_EQ(b.pauses(), 0);
}

}  // namespace
