// Monotonic wall-clock seconds, the one time base of traces and progress figures.
#pragma once
#include <chrono>

namespace glacier {

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace glacier
