// How a thread that polls for something (a message, a finished collective, work from another rank)
// waits between polls: a few yields while the answer is likely imminent, then sleeps that grow to a cap,
// so a rank on an oversubscribed node never busy-polls a core another rank computes on. Every polling
// loop of the job uses one of the policies below.
#pragma once
#include <chrono>
#include <cstdint>

namespace glacier {

struct BackoffPolicy {
  int yields;                       // polls answered by yielding the core before the first sleep
  std::chrono::microseconds step;   // the k-th sleep lasts k * step ...
  std::chrono::microseconds cap;    // ... up to this
};

namespace backoff {
using std::chrono::microseconds;
// A pipeline message or a request due within a compute step: yield first, then sleep 64 us up to 200 us.
inline constexpr BackoffPolicy kMessage{64, microseconds(1), microseconds(200)};
// A collective or a peer that may take seconds (start-up, a barrier): 10 us more each poll, up to 1 ms.
inline constexpr BackoffPolicy kCollective{0, microseconds(10), microseconds(1000)};
// A coordinator with nothing to do until a replica asks or a result arrives: 200 us a poll.
inline constexpr BackoffPolicy kIdleCoordinator{0, microseconds(200), microseconds(200)};
// A driver waiting for its ring's next result: 1 ms a poll (a micro-batch takes longer).
inline constexpr BackoffPolicy kIdleDriver{0, microseconds(1000), microseconds(1000)};
}  // namespace backoff

class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy) : policy_(policy) {}
  // One wait between two polls.
  void pause();
  // After a poll that found something: the next wait starts short again.
  void reset() { pauses_ = 0; }
  int64_t pauses() const { return pauses_; }
  // The wait before poll k + 1 (k counted from 1): zero (a yield) for the first `yields - 1` pauses, then
  // k * step, at most cap.
  static std::chrono::microseconds delay(const BackoffPolicy& policy, int64_t k);

 private:
  BackoffPolicy policy_;
  int64_t pauses_ = 0;
};

}  // namespace glacier
