// --slow-rank's throttle: it sleeps at least (FACTOR - 1) x the compute time it is given, keeps driving
// progress meanwhile, and does nothing at factor 1. Only lower bounds on sleeping are asserted.
#include <gtest/gtest.h>

#include "compute/compute_throttle.h"
#include "util/clock.h"

namespace {

using glacier::now_seconds;
using glacier::compute::ComputeThrottle;

constexpr double kCompute = 0.02;  // seconds of "compute" handed to the throttle

TEST(ComputeThrottle, SleepsFactorMinusOneTimesTheComputeAndDrivesProgress) {
  const ComputeThrottle throttle(3.0);
  int progress_calls = 0;
  const double t0 = now_seconds();
  throttle.after_compute(kCompute, [&] { ++progress_calls; });
  EXPECT_GE(now_seconds() - t0, 2.0 * kCompute);
  EXPECT_GE(progress_calls, 2) << "progress is driven in slices while sleeping";
}

TEST(ComputeThrottle, FactorOneDoesNotSleepOrCallProgress) {
  const ComputeThrottle throttle;
  int progress_calls = 0;
  throttle.after_compute(kCompute, [&] { ++progress_calls; });
  EXPECT_EQ(progress_calls, 0);
  EXPECT_EQ(throttle.factor(), 1.0);
}

}  // namespace
