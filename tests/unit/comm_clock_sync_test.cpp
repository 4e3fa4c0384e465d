// Clock alignment: ranks whose clocks run seconds apart get rank 0's time back, within the bound the
// alignment reports.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "comm/clock_sync.h"
#include "comm/inprocess_channel.h"
#include "util/clock.h"

namespace {

using glacier::comm::ClockOffset;

std::vector<ClockOffset> align(const std::vector<double>& skews_s) {
  const int n = static_cast<int>(skews_s.size());
  auto channels = glacier::comm::make_inprocess_channels(n);
  std::vector<ClockOffset> offsets(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      const double skew = skews_s[static_cast<size_t>(r)];
      offsets[static_cast<size_t>(r)] =
          glacier::comm::offset_to_root(*channels[static_cast<size_t>(r)], [skew] { return glacier::now_seconds() + skew; });
    });
  for (auto& t : threads) t.join();
  return offsets;
}

TEST(ClockSync, SkewedClocksAreAlignedToRankZeroWithinTheReportedBound) {
  // Clocks far apart and on both sides of rank 0's (a host booted later, a host booted earlier).
  const std::vector<double> skews = {3.0, 0.0, 3.0 + 1234.5, -77.25};
  const std::vector<ClockOffset> offsets = align(skews);
  EXPECT_EQ(offsets[0].offset_s, 0.0);
  EXPECT_EQ(offsets[0].error_s, 0.0);
  for (size_t r = 1; r < skews.size(); ++r) {
    const double truth = skews[0] - skews[r];
    // Threads of one process trade messages in microseconds; a bound of a second would mean no alignment.
    EXPECT_LT(offsets[r].error_s, 0.1) << "rank " << r;
    // The estimate is rank 0's reading against the round trip's midpoint: off by at most half the trip.
    // (1 us more for the double arithmetic on clock values of thousands of seconds.)
    EXPECT_NEAR(offsets[r].offset_s, truth, offsets[r].error_s + 1e-6) << "rank " << r;
  }
}

TEST(ClockSync, OneRankHasNothingToAlign) {
  const std::vector<ClockOffset> offsets = align({42.0});
  EXPECT_EQ(offsets[0].offset_s, 0.0);
}

}  // namespace
