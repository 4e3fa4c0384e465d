// /trace: seven 1-D datasets (rank, microbatch, phase, start, end, tokens, bytes), one row per timed
// interval; phase names are an attribute of /trace/phase.
#include "io/hdf5_trace.h"

#include <hdf5.h>

#include <algorithm>
#include <filesystem>

#include "io/hdf5_util.h"
#include "util/error.h"

namespace glacier::io {
namespace {

using h5::check;
using h5::check_status;
using h5::Handle;

struct TraceColumn {
  const char* name;
  hid_t file_type;
  hid_t memory_type;
};

std::vector<TraceColumn> trace_columns() {
  return {{"rank", H5T_STD_I32LE, H5T_NATIVE_INT32},   {"microbatch", H5T_STD_I64LE, H5T_NATIVE_INT64},
          {"phase", H5T_STD_U8LE, H5T_NATIVE_UINT8},   {"start", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE},
          {"end", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE},  {"tokens", H5T_STD_I32LE, H5T_NATIVE_INT32},
          {"bytes", H5T_STD_I64LE, H5T_NATIVE_INT64}};
}

// Column-wise copies of the rows, in trace_columns() order.
struct TraceBuffers {
  std::vector<int32_t> rank, tokens;
  std::vector<int64_t> microbatch, bytes;
  std::vector<uint8_t> phase;
  std::vector<double> start, end;

  explicit TraceBuffers(size_t n) : rank(n), tokens(n), microbatch(n), bytes(n), phase(n), start(n), end(n) {}
  void* column(size_t c) {
    void* columns[] = {rank.data(), microbatch.data(), phase.data(), start.data(), end.data(), tokens.data(), bytes.data()};
    return columns[c];
  }
};

TraceBuffers to_buffers(const std::vector<TraceRow>& rows) {
  TraceBuffers b(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    b.rank[i] = rows[i].rank;
    b.microbatch[i] = rows[i].microbatch;
    b.phase[i] = static_cast<uint8_t>(rows[i].phase);
    b.start[i] = rows[i].start;
    b.end[i] = rows[i].end;
    b.tokens[i] = rows[i].tokens;
    b.bytes[i] = rows[i].bytes;
  }
  return b;
}

Handle open_or_create(const std::string& path) {
  hid_t file = std::filesystem::exists(path) ? H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)
                                             : H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) throw InputError("cannot open " + path + " to write its trace" + h5::error_detail());
  return Handle(file, H5Fclose);
}

void write_trace_table(hid_t file, const std::string& path, const std::vector<TraceRow>& rows, double clock_error_s,
                       const TraceCounters& counters) {
  const std::string what = "cannot write /trace to " + path;
  if (h5::link_exists(file, "trace")) check_status(H5Ldelete(file, "trace", H5P_DEFAULT), what);
  Handle group(check(H5Gcreate2(file, "trace", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), what), H5Gclose);
  h5::write_attribute(group.get(), "clock_error_s", clock_error_s);
  h5::write_attribute(group.get(), "prompt_tokens_computed", counters.prompt_tokens_computed);
  h5::write_attribute(group.get(), "prompt_tokens_reused", counters.prompt_tokens_reused);
  h5::write_attribute(group.get(), "speculation_verifications", counters.speculation_verifications);
  h5::write_attribute(group.get(), "speculation_drafted", counters.speculation_drafted);
  h5::write_attribute(group.get(), "speculation_accepted", counters.speculation_accepted);
  h5::write_attribute(group.get(), "speculation_emitted", counters.speculation_emitted);
  h5::write_attribute(group.get(), "speculation_skipped_ring_full", counters.speculation_skipped_ring_full);
  h5::write_attribute(group.get(), "speculation_skipped_low_acceptance", counters.speculation_skipped_low_acceptance);

  const hsize_t count = rows.size();
  Handle dcpl(check(H5Pcreate(H5P_DATASET_CREATE), what), H5Pclose);
  check_status(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), what);  // every row gets written
  TraceBuffers buffers = to_buffers(rows);
  const auto columns = trace_columns();
  for (size_t c = 0; c < columns.size(); ++c) {
    Handle space(check(H5Screate_simple(1, &count, nullptr), what), H5Sclose);
    Handle dataset(check(H5Dcreate2(group.get(), columns[c].name, columns[c].file_type, space.get(), H5P_DEFAULT,
                                    dcpl.get(), H5P_DEFAULT),
                         what + " (/trace/" + columns[c].name + ")"),
                   H5Dclose);
    if (count > 0)
      check_status(H5Dwrite(dataset.get(), columns[c].memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffers.column(c)),
                   what + " (/trace/" + columns[c].name + ")");
    if (std::string(columns[c].name) == "phase") {
      std::vector<std::string> names;
      for (int p = 0; p < kTracePhaseCount; ++p) names.emplace_back(trace_phase_name(static_cast<TracePhase>(p)));
      h5::write_string_list_attribute(dataset.get(), "phase_names", names);
    }
  }
}

}  // namespace

void write_trace(const std::string& path, const std::vector<TraceRow>& rows, double clock_error_s,
                 const TraceCounters& counters) {
  h5::silence_errors();
  Handle file = open_or_create(path);
  write_trace_table(file.get(), path, rows, clock_error_s, counters);
  if (!file.reset()) throw std::runtime_error("cannot close " + path + " after writing its trace" + h5::error_detail());
}

namespace {

Handle open_trace_file(const std::string& path) {
  Handle file = h5::open_for_reading(path, "trace file");
  if (!h5::link_exists(file.get(), "trace"))
    throw InputError("trace file " + path + ": expected a group /trace, found none (was the job run with tracing?)");
  return file;
}

}  // namespace

double read_trace_clock_error(const std::string& path) {
  Handle file = open_trace_file(path);
  Handle group(check(H5Gopen2(file.get(), "trace", H5P_DEFAULT), path + ": cannot open /trace"), H5Gclose);
  const auto attrs = h5::read_attributes(group.get());
  const auto it = attrs.find("clock_error_s");
  if (it == attrs.end()) return 0.0;
  if (const double* v = std::get_if<double>(&it->second)) return *v;
  throw InputError("trace file " + path + ": expected /trace attribute clock_error_s to be a float");
}

TraceCounters read_trace_counters(const std::string& path) {
  Handle file = open_trace_file(path);
  Handle group(check(H5Gopen2(file.get(), "trace", H5P_DEFAULT), path + ": cannot open /trace"), H5Gclose);
  const auto attrs = h5::read_attributes(group.get());
  const auto count = [&](const char* name) -> int64_t {
    const auto it = attrs.find(name);
    if (it == attrs.end()) return 0;
    if (const int64_t* v = std::get_if<int64_t>(&it->second)) return *v;
    throw InputError("trace file " + path + ": expected /trace attribute " + name + " to be an integer");
  };
  return {count("prompt_tokens_computed"),    count("prompt_tokens_reused"), count("speculation_verifications"),
          count("speculation_drafted"),       count("speculation_accepted"), count("speculation_emitted"),
          count("speculation_skipped_ring_full"), count("speculation_skipped_low_acceptance")};
}

std::vector<TraceRow> read_trace(const std::string& path) {
  Handle file = open_trace_file(path);
  const auto columns = trace_columns();
  std::vector<Handle> datasets;
  hsize_t n = 0;
  for (size_t c = 0; c < columns.size(); ++c) {
    const std::string name = std::string("trace/") + columns[c].name;
    if (!h5::link_exists(file.get(), name))
      throw InputError("trace file " + path + ": expected dataset /" + name + ", found none");
    datasets.emplace_back(check(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), path + ": cannot open /" + name),
                          H5Dclose);
    Handle space(check(H5Dget_space(datasets.back().get()), path), H5Sclose);
    hsize_t length = 0;
    if (H5Sget_simple_extent_ndims(space.get()) != 1 || H5Sget_simple_extent_dims(space.get(), &length, nullptr) < 0)
      throw InputError("trace file " + path + ": expected /" + name + " to be 1-D");
    if (c > 0 && length != n)
      throw InputError("trace file " + path + ": expected /" + name + " to have " + std::to_string(n) +
                       " rows like /trace/rank, found " + std::to_string(length));
    n = length;
  }
  TraceBuffers buffers(n);
  if (n > 0)
    for (size_t c = 0; c < columns.size(); ++c)
      check_status(H5Dread(datasets[c].get(), columns[c].memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffers.column(c)),
                   "cannot read /trace/" + std::string(columns[c].name) + " from " + path);
  std::vector<TraceRow> rows(n);
  for (hsize_t i = 0; i < n; ++i) {
    if (buffers.phase[i] >= kTracePhaseCount)
      throw InputError("trace file " + path + ": /trace/phase row " + std::to_string(i) + ": expected a phase 0.." +
                       std::to_string(kTracePhaseCount - 1) + ", found " + std::to_string(buffers.phase[i]));
    rows[i] = TraceRow{buffers.rank[i],  buffers.microbatch[i], static_cast<TracePhase>(buffers.phase[i]),
                       buffers.start[i], buffers.end[i],        buffers.tokens[i], buffers.bytes[i]};
  }
  return rows;
}

}  // namespace glacier::io
