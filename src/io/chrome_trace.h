// Trace rows as Chrome/Perfetto trace-event JSON: one process per rank, named "replica r / stage s @
// host", one complete ("X") event per interval, and flow arrows for each micro-batch's hops from one
// stage to the next, so chrome://tracing or ui.perfetto.dev shows the pipeline's timeline.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/attribute_value.h"
#include "io/result_record.h"

namespace glacier::io {

// Where each rank sat: replicas are consecutive blocks of `stages` ranks (rank = replica * stages + stage).
struct TraceLayout {
  int32_t stages = 1;
  std::vector<std::string> hosts;  // by rank; empty when unknown
};

// The layout a results file records: stages from layer_split's entries, hosts from `hosts`. Without
// those attributes (a trace written alone) every rank is a stage of one replica and hosts are unknown.
// Throws InputError naming `path` when the attributes contradict each other.
TraceLayout trace_layout(const std::map<std::string, AttributeValue>& root_attributes, const std::vector<TraceRow>& rows,
                         const std::string& path);

// {"traceEvents": [...], "displayTimeUnit": "ms"}; times in microseconds since job start.
nlohmann::json chrome_trace_events(const std::vector<TraceRow>& rows, const TraceLayout& layout);

}  // namespace glacier::io
