// --slow-rank, a testing and benchmark aid: makes one rank stand in for a slower machine by sleeping
// (FACTOR - 1) x each of its compute intervals right after it, inside the traced compute interval.
#pragma once
#include <functional>

namespace glacier::compute {

class ComputeThrottle {
 public:
  ComputeThrottle() = default;  // factor 1: no slowdown
  explicit ComputeThrottle(double factor);
  double factor() const { return factor_; }
  // Sleeps (factor - 1) x compute_seconds. `progress` (when set) is called every few milliseconds
  // meanwhile, so transfers keep advancing as they would between a slow machine's layers.
  void after_compute(double compute_seconds, const std::function<void()>& progress = {}) const;

 private:
  double factor_ = 1.0;
};

}  // namespace glacier::compute
