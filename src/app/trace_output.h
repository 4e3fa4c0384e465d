// Writes every rank's trace into the results file's /trace table at the end of the job: each rank
// its own rows, in parallel through MPI-IO (one rank: a plain serial write).
#pragma once
#include <string>

#include "comm/channel.h"
#include "pipeline/trace.h"

namespace glacier::app {

// Collective: every rank calls it after the results file has been closed by rank 0.
void write_trace(const std::string& h5_path, comm::Channel& ch, const pipeline::TraceLog& trace);

}  // namespace glacier::app
