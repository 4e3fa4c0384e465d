// Every rank's trace on one time axis: the common origin the job's run starts from, and the end-of-job
// write into the results file's /trace table (gathered over the channel, written by rank 0).
#pragma once
#include <string>

#include "comm/channel.h"
#include "comm/clock_sync.h"
#include "io/result_record.h"
#include "pipeline/trace.h"

namespace glacier::app {

// Collective: sets every rank's trace origin to rank 0's clock now, through `clock` (this rank's
// offset to rank 0, from comm::offset_to_root), so intervals of different ranks compare.
void start_trace_clock(comm::Channel& ch, const comm::ClockOffset& clock, pipeline::TraceLog& trace);

// Collective: every rank calls it after the results file has been closed by rank 0. /trace's
// clock_error_s is the largest of the ranks' alignment errors; `counters` (a replica driver's, zero
// elsewhere) are summed over the ranks.
void write_trace(const std::string& h5_path, comm::Channel& ch, const pipeline::TraceLog& trace,
                 const io::TraceCounters& counters);

}  // namespace glacier::app
