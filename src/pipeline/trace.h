// A rank's timeline: intervals of waiting, receiving, computing and sending per micro-batch, kept in
// memory (reserved up front) and written to the results file at the end of the job.
#pragma once
#include <cstdint>
#include <vector>

#include "compute/microbatch.h"
#include "util/clock.h"

namespace glacier::pipeline {

// Numbering shared with io::TracePhase. Verify: the compute interval of a micro-batch carrying at least
// one verify chunk (--speculate). Draft: the driver's prompt lookups for one micro-batch it built.
enum class Phase : uint8_t { Recv = 0, Compute = 1, Send = 2, Wait = 3, Verify = 4, Draft = 5 };

// The phase a micro-batch's compute interval is recorded as.
inline Phase compute_phase(const compute::MicroBatch& mb) {
  for (const compute::Chunk& c : mb.chunks)
    if (c.output == compute::OutputKind::Verify) return Phase::Verify;
  return Phase::Compute;
}

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
