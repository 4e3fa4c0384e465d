// Trace output: the row offsets come from an allgather over the channel; the parallel HDF5 write takes
// the world communicator, which HDF5's own header declares (this file makes no MPI calls).
#include "app/trace_output.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "io/hdf5_trace.h"
#include "io/result_record.h"
#include "util/clock.h"
#include "util/log.h"

namespace glacier::app {

void start_trace_clock(comm::Channel& ch, const comm::ClockOffset& clock, pipeline::TraceLog& trace) {
  // Nanoseconds of the steady clock fit an int64 for centuries; allgather is the channel's broadcast.
  const int64_t root_now_ns = ch.rank() == 0 ? std::llround(now_seconds() * 1e9) : 0;
  const double root_origin = static_cast<double>(ch.allgather(root_now_ns)[0]) * 1e-9;
  trace.set_origin(root_origin - clock.offset_s, clock.error_s);
  if (ch.rank() != 0)
    GLACIER_LOG_DEBUG("trace clock: %+.1f us from rank 0's, aligned within %.1f us", clock.offset_s * 1e6,
                      clock.error_s * 1e6);
}

void write_trace(const std::string& h5_path, comm::Channel& ch, const pipeline::TraceLog& trace,
                 const io::TraceCounters& mine) {
  std::vector<io::TraceRow> rows;
  rows.reserve(trace.events().size());
  for (const pipeline::TraceEvent& e : trace.events()) {
    io::TraceRow r;
    r.rank = ch.rank();
    r.microbatch = e.microbatch;
    r.phase = static_cast<io::TracePhase>(e.phase);
    r.start = e.start;
    r.end = e.end;
    r.tokens = e.tokens;
    r.bytes = e.bytes;
    rows.push_back(r);
  }
  // The worst rank's alignment, in nanoseconds (allgather carries integers); rounded up.
  const std::vector<int64_t> errors_ns = ch.allgather(static_cast<int64_t>(std::ceil(trace.origin_error_s() * 1e9)));
  const double clock_error_s = static_cast<double>(*std::max_element(errors_ns.begin(), errors_ns.end())) * 1e-9;
  io::TraceCounters counters;
  for (int64_t n : ch.allgather(mine.prompt_tokens_computed)) counters.prompt_tokens_computed += n;
  for (int64_t n : ch.allgather(mine.prompt_tokens_reused)) counters.prompt_tokens_reused += n;
  if (ch.size() == 1) {
    io::write_trace_serial(h5_path, rows, clock_error_s, counters);
    return;
  }
  const std::vector<int64_t> counts = ch.allgather(static_cast<int64_t>(rows.size()));
  const int64_t offset = std::accumulate(counts.begin(), counts.begin() + ch.rank(), int64_t{0});
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (total == 0) {  // parallel HDF5 cannot write a zero-length selection into an empty dataset
    if (ch.rank() == 0) io::write_trace_serial(h5_path, rows, clock_error_s, counters);
    return;
  }
  io::write_trace_parallel(h5_path, MPI_COMM_WORLD, rows, offset, total, clock_error_s, counters);
}

}  // namespace glacier::app
