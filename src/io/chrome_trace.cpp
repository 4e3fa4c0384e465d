// Chrome trace-event JSON from trace rows, with thread-name metadata so each rank's row is labelled.
#include "io/chrome_trace.h"

#include <algorithm>
#include <set>
#include <string>

namespace glacier::io {

nlohmann::json chrome_trace_events(const std::vector<TraceRow>& rows) {
  constexpr double kMicrosecondsPerSecond = 1e6;
  nlohmann::json events = nlohmann::json::array();
  std::set<int32_t> ranks;
  for (const auto& row : rows) ranks.insert(row.rank);
  for (int32_t rank : ranks)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", rank},
                      {"args", {{"name", "rank " + std::to_string(rank)}}}});
  for (const auto& row : rows) {
    events.push_back({{"name", trace_phase_name(row.phase)},
                      {"ph", "X"},
                      {"ts", row.start * kMicrosecondsPerSecond},
                      {"dur", std::max(0.0, row.end - row.start) * kMicrosecondsPerSecond},
                      {"pid", 0},
                      {"tid", row.rank},
                      {"args", {{"microbatch", row.microbatch}, {"tokens", row.tokens}, {"bytes", row.bytes}}}});
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace glacier::io
