// Monotonic wall-clock seconds, the one time base of traces and progress figures; and the calling
// thread's CPU seconds (time it actually ran, for measurements that other processes must not skew).
#pragma once
#include <time.h>

#include <chrono>

namespace glacier {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace glacier
