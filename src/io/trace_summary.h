// What a trace says about pipeline efficiency: per rank, the share of the job span spent computing,
// waiting, receiving, sending, and in the bubble (no phase recorded at all).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/result_record.h"

namespace glacier::io {

struct RankSummary {
  int32_t rank = 0;
  // Seconds covered by each phase (overlapping intervals of one phase count once), index = TracePhase;
  // Compute includes the Verify intervals.
  double phase_seconds[kTracePhaseCount] = {};
  double bubble_seconds = 0;  // span time covered by no interval of this rank
  int64_t intervals = 0;

  double fraction(TracePhase phase, double span) const;
  double bubble_fraction(double span) const;
};

struct TraceSummary {
  double job_start = 0;  // earliest start over all ranks
  double job_end = 0;    // latest end over all ranks
  std::vector<RankSummary> ranks;  // sorted by rank
  double span() const { return job_end - job_start; }
};

// Intervals with end < start are taken as empty. An empty trace gives an empty summary.
TraceSummary summarize_trace(const std::vector<TraceRow>& rows);

// Fixed-column text table (one line per rank) for glacier_trace.
std::string format_trace_summary(const TraceSummary& summary);

}  // namespace glacier::io
