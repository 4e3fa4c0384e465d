// The /trace table of a results file: one row per timed interval of every rank. Written once at the
// end of a job, by all ranks together through MPI-IO (or serially for one-rank jobs and tests).
#pragma once
#include <hdf5.h>  // brings MPI_Comm with the parallel HDF5 build; io never calls MPI itself

#include <cstdint>
#include <string>
#include <vector>

#include "io/result_record.h"

namespace glacier::io {

// Collective over `comm`: opens the closed results file at `path` (creates it when missing) with the
// MPI-IO driver, replaces /trace by datasets of `total_rows` rows and writes `my_rows` at `my_offset`.
// Offsets and total come from the caller (an allgather of row counts in src/comm). `clock_error_s`, the
// same on every rank, becomes /trace's attribute of that name: how far apart two ranks' times may be
// for one instant (the worst rank's clock alignment).
void write_trace_parallel(const std::string& path, MPI_Comm comm, const std::vector<TraceRow>& my_rows,
                          int64_t my_offset, int64_t total_rows, double clock_error_s = 0.0,
                          const TraceCounters& counters = {});

// The same table from one process: opens (or creates) `path` with the default driver.
void write_trace_serial(const std::string& path, const std::vector<TraceRow>& rows, double clock_error_s = 0.0,
                        const TraceCounters& counters = {});

// Every /trace row in file order; throws InputError naming the path when there is no /trace table.
std::vector<TraceRow> read_trace(const std::string& path);
// /trace's clock_error_s attribute (0 for files written before it existed).
double read_trace_clock_error(const std::string& path);
// /trace's prompt_tokens_computed and prompt_tokens_reused attributes (0 for files written before them).
TraceCounters read_trace_counters(const std::string& path);

}  // namespace glacier::io
