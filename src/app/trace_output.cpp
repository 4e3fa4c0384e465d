// Trace output: the row offsets come from an allgather over the channel; the parallel HDF5 write takes
// the world communicator, which HDF5's own header declares (this file makes no MPI calls).
#include "app/trace_output.h"

#include <numeric>

#include "io/hdf5_trace.h"
#include "io/result_record.h"

namespace glacier::app {

void write_trace(const std::string& h5_path, comm::Channel& ch, const pipeline::TraceLog& trace) {
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
  if (ch.size() == 1) {
    io::write_trace_serial(h5_path, rows);
    return;
  }
  const std::vector<int64_t> counts = ch.allgather(static_cast<int64_t>(rows.size()));
  const int64_t offset = std::accumulate(counts.begin(), counts.begin() + ch.rank(), int64_t{0});
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (total == 0) {  // parallel HDF5 cannot write a zero-length selection into an empty dataset
    if (ch.rank() == 0) io::write_trace_serial(h5_path, rows);
    return;
  }
  io::write_trace_parallel(h5_path, MPI_COMM_WORLD, rows, offset, total);
}

}  // namespace glacier::app
