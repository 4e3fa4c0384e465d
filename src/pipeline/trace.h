// A rank's timeline: intervals of waiting, receiving, computing and sending per micro-batch, kept in
// memory (reserved up front) and written to the results file at the end of the job.
#pragma once
#include <cstdint>
#include <vector>

#include "util/clock.h"

namespace glacier::pipeline {

enum class Phase : uint8_t { Recv = 0, Compute = 1, Send = 2, Wait = 3 };  // numbering shared with io::TracePhase

struct TraceEvent {
  int64_t microbatch = -1;
  Phase phase = Phase::Compute;
  double start = 0.0;  // seconds since the job's start, on rank 0's clock
  double end = 0.0;
  int32_t tokens = 0;
  int64_t bytes = 0;
};

class TraceLog {
 public:
  explicit TraceLog(double t0 = now_seconds()) : t0_(t0) { events_.reserve(1 << 16); }
  double now() const { return now_seconds() - t0_; }
  // Moves the time origin to `t0` on this process's clock (the job's common start; see comm/clock_sync.h),
  // known to within `error_s` of the origin on rank 0's clock.
  void set_origin(double t0, double error_s) {
    t0_ = t0;
    origin_error_s_ = error_s;
  }
  double origin_error_s() const { return origin_error_s_; }
  void add(int64_t mb, Phase phase, double start, double end, int32_t tokens = 0, int64_t bytes = 0) {
    events_.push_back({mb, phase, start, end, tokens, bytes});
  }
  const std::vector<TraceEvent>& events() const { return events_; }

 private:
  double t0_;
  double origin_error_s_ = 0.0;
  std::vector<TraceEvent> events_;
};

}  // namespace glacier::pipeline
