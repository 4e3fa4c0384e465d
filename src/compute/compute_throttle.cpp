// The slowdown of --slow-rank: a sleep in slices, so MPI progress is still driven while "computing".
#include "compute/compute_throttle.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "util/clock.h"
#include "util/error.h"

namespace glacier::compute {
namespace {

// Between two progress calls: short next to a compute interval, long next to the cost of a call.
constexpr double kProgressSliceSeconds = 0.002;

}  // namespace

ComputeThrottle::ComputeThrottle(double factor) : factor_(factor) {
  GLACIER_ASSERT(factor >= 1.0, "a slowdown factor >= 1");
}

void ComputeThrottle::after_compute(double compute_seconds, const std::function<void()>& progress) const {
  if (factor_ <= 1.0 || compute_seconds <= 0.0) return;
  const double until = now_seconds() + (factor_ - 1.0) * compute_seconds;
  for (double left = until - now_seconds(); left > 0.0; left = until - now_seconds()) {
    const double slice = progress ? std::min(left, kProgressSliceSeconds) : left;
    std::this_thread::sleep_for(std::chrono::duration<double>(slice));
    if (progress) progress();
  }
}

}  // namespace glacier::compute
