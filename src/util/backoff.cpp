// Backoff::pause (backoff.h).
#include "util/backoff.h"

#include <algorithm>
#include <thread>

namespace glacier {

std::chrono::microseconds Backoff::delay(const BackoffPolicy& policy, int64_t k) {
  if (k < policy.yields) return std::chrono::microseconds(0);
  return std::min(policy.cap, policy.step * k);
}

void Backoff::pause() {
  const std::chrono::microseconds wait = delay(policy_, ++pauses_);
  if (wait.count() == 0) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(wait);
  }
}

}  // namespace glacier
