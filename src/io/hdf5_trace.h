// The /trace table of a results file: one row per timed interval of every rank. Written once at the
// end of a job by rank 0, which has gathered the other ranks' rows.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/result_record.h"

namespace glacier::io {

// Opens (or creates) `path` and replaces its /trace by `rows`; `clock_error_s` (how far apart two ranks'
// times may be for one instant) and the job's prompt-token counters become /trace's attributes.
void write_trace(const std::string& path, const std::vector<TraceRow>& rows, double clock_error_s = 0.0,
                 const TraceCounters& counters = {});

// Every /trace row in file order; throws InputError naming the path when there is no /trace table.
std::vector<TraceRow> read_trace(const std::string& path);
// /trace's clock_error_s attribute (0 for files written before it existed).
double read_trace_clock_error(const std::string& path);
// /trace's counter attributes (prompt tokens, speculation; 0 for files written before them).
TraceCounters read_trace_counters(const std::string& path);

}  // namespace glacier::io
