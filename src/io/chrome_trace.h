// Trace rows as Chrome/Perfetto trace-event JSON: one complete ("X") event per interval, one thread
// (tid) per rank, so chrome://tracing or ui.perfetto.dev shows the pipeline's timeline.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "io/result_record.h"

namespace glacier::io {

// {"traceEvents": [...], "displayTimeUnit": "ms"}; times in microseconds since job start.
nlohmann::json chrome_trace_events(const std::vector<TraceRow>& rows);

}  // namespace glacier::io
