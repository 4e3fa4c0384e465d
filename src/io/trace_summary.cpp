// Per-rank phase and bubble fractions from trace intervals, by measuring unions of intervals so that
// overlapping records (a send posted during compute) are not counted twice.
#include "io/trace_summary.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

namespace glacier::io {
namespace {

using Interval = std::pair<double, double>;

double union_length(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end());
  double total = 0, cur_start = 0, cur_end = 0;
  bool open = false;
  for (const auto& [start, end] : intervals) {
    if (end <= start) continue;
    if (!open || start > cur_end) {
      if (open) total += cur_end - cur_start;
      cur_start = start;
      cur_end = end;
      open = true;
    } else {
      cur_end = std::max(cur_end, end);
    }
  }
  if (open) total += cur_end - cur_start;
  return total;
}

}  // namespace

double RankSummary::fraction(TracePhase phase, double span) const {
  return span > 0 ? phase_seconds[static_cast<int>(phase)] / span : 0.0;
}

double RankSummary::bubble_fraction(double span) const { return span > 0 ? bubble_seconds / span : 0.0; }

TraceSummary summarize_trace(const std::vector<TraceRow>& rows) {
  TraceSummary summary;
  if (rows.empty()) return summary;
  summary.job_start = rows.front().start;
  summary.job_end = rows.front().end;
  struct PerRank {
    std::vector<Interval> by_phase[kTracePhaseCount];
    std::vector<Interval> all;
  };
  std::map<int32_t, PerRank> ranks;
  for (const auto& row : rows) {
    summary.job_start = std::min(summary.job_start, row.start);
    summary.job_end = std::max({summary.job_end, row.end, row.start});
    PerRank& r = ranks[row.rank];
    r.by_phase[static_cast<int>(row.phase)].emplace_back(row.start, row.end);
    // Compute's share includes verify steps (the verify phase keeps its own share too).
    if (row.phase == TracePhase::Verify) r.by_phase[static_cast<int>(TracePhase::Compute)].emplace_back(row.start, row.end);
    r.all.emplace_back(row.start, row.end);
  }
  for (auto& [rank, r] : ranks) {
    RankSummary s;
    s.rank = rank;
    s.intervals = static_cast<int64_t>(r.all.size());
    for (int p = 0; p < kTracePhaseCount; ++p) s.phase_seconds[p] = union_length(std::move(r.by_phase[p]));
    s.bubble_seconds = std::max(0.0, summary.span() - union_length(std::move(r.all)));
    summary.ranks.push_back(s);
  }
  return summary;
}

std::string format_trace_summary(const TraceSummary& summary) {
  const double span = summary.span();
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "job span %.6f s; fractions of the span per rank:\n", span);
  out += line;
  std::snprintf(line, sizeof line, "%6s %9s %8s %8s %8s %8s %10s\n", "rank", "compute", "wait", "recv", "send",
                "bubble", "intervals");
  out += line;
  for (const auto& r : summary.ranks) {
    std::snprintf(line, sizeof line, "%6d %9.4f %8.4f %8.4f %8.4f %8.4f %10lld\n", r.rank,
                  r.fraction(TracePhase::Compute, span), r.fraction(TracePhase::Wait, span),
                  r.fraction(TracePhase::Recv, span), r.fraction(TracePhase::Send, span), r.bubble_fraction(span),
                  static_cast<long long>(r.intervals));
    out += line;
  }
  return out;
}

}  // namespace glacier::io
