// Trace output: every rank's timed intervals gathered over the channel to rank 0, which writes the
// results file's /trace table.
#include "app/trace_output.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "comm/message_tags.h"
#include "io/hdf5_trace.h"
#include "io/result_record.h"
#include "util/clock.h"
#include "util/error.h"
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

namespace {

// A trace row on the wire: its fields one after the other in host byte order (the ranks of a job run one
// build, so they agree on it).
constexpr size_t kRowBytes = sizeof(int32_t) + sizeof(int64_t) + sizeof(int32_t) + 2 * sizeof(double) +
                             sizeof(int32_t) + sizeof(int64_t);

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

template <typename T>
T take(const uint8_t*& p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  p += sizeof v;
  return v;
}

std::vector<uint8_t> encode_rows(const std::vector<io::TraceRow>& rows) {
  std::vector<uint8_t> out;
  out.reserve(rows.size() * kRowBytes);
  for (const io::TraceRow& r : rows) {
    put(out, r.rank);
    put(out, r.microbatch);
    put(out, static_cast<int32_t>(r.phase));
    put(out, r.start);
    put(out, r.end);
    put(out, r.tokens);
    put(out, r.bytes);
  }
  return out;
}

void decode_rows(const std::vector<uint8_t>& bytes, std::vector<io::TraceRow>& rows) {
  const uint8_t* p = bytes.data();
  for (size_t i = 0; i < bytes.size() / kRowBytes; ++i) {
    io::TraceRow r;
    r.rank = take<int32_t>(p);
    r.microbatch = take<int64_t>(p);
    r.phase = static_cast<io::TracePhase>(take<int32_t>(p));
    r.start = take<double>(p);
    r.end = take<double>(p);
    r.tokens = take<int32_t>(p);
    r.bytes = take<int64_t>(p);
    rows.push_back(r);
  }
}

}  // namespace

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
  for (int64_t n : ch.allgather(mine.speculation_verifications)) counters.speculation_verifications += n;
  for (int64_t n : ch.allgather(mine.speculation_drafted)) counters.speculation_drafted += n;
  for (int64_t n : ch.allgather(mine.speculation_accepted)) counters.speculation_accepted += n;
  for (int64_t n : ch.allgather(mine.speculation_emitted)) counters.speculation_emitted += n;
  for (int64_t n : ch.allgather(mine.speculation_skipped_ring_full)) counters.speculation_skipped_ring_full += n;
  for (int64_t n : ch.allgather(mine.speculation_skipped_low_acceptance)) counters.speculation_skipped_low_acceptance += n;
  // Every rank's rows reach rank 0 over the channel, in rank order, and rank 0 alone writes the file.
  const std::vector<int64_t> counts = ch.allgather(static_cast<int64_t>(rows.size()));
  if (ch.rank() != 0) {
    const std::vector<uint8_t> bytes = encode_rows(rows);
    comm::Request sent = ch.isend(bytes.data(), bytes.size(), 0, comm::tags::kTraceRows);
    ch.wait(sent);
    return;
  }
  for (int r = 1; r < ch.size(); ++r) {
    std::vector<uint8_t> bytes(static_cast<size_t>(counts[r]) * kRowBytes);
    comm::Request received = ch.irecv(bytes.data(), bytes.size(), r, comm::tags::kTraceRows);
    size_t got = 0;
    ch.wait(received, &got);
    GLACIER_ASSERT(got == bytes.size(), "rank " + std::to_string(r) + "'s trace rows arrived whole");
    decode_rows(bytes, rows);
  }
  io::write_trace(h5_path, rows, clock_error_s, counters);
}

}  // namespace glacier::app
