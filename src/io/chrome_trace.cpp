// Chrome trace-event JSON from trace rows: process-name metadata per rank, the intervals, and flow
// events ("s" on the sending stage's send interval, "f" on the next stage's receive of the same
// micro-batch). The last stage's results going back to the driver are not drawn: that hop is the
// driver's "recv" and would cross the whole timeline for every micro-batch.
#include "io/chrome_trace.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "util/error.h"

namespace glacier::io {
namespace {

constexpr double kMicrosecondsPerSecond = 1e6;

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  if (text.empty()) return parts;
  size_t start = 0;
  for (size_t comma = text.find(','); ; comma = text.find(',', start)) {
    parts.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

const std::string* string_attribute(const std::map<std::string, AttributeValue>& attrs, const char* name) {
  const auto it = attrs.find(name);
  return it == attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
}

std::string process_name(int32_t rank, const TraceLayout& layout) {
  std::string name = "replica " + std::to_string(rank / layout.stages) + " / stage " + std::to_string(rank % layout.stages);
  if (static_cast<size_t>(rank) < layout.hosts.size()) name += " @ " + layout.hosts[static_cast<size_t>(rank)];
  return name;
}

}  // namespace

TraceLayout trace_layout(const std::map<std::string, AttributeValue>& attrs, const std::vector<TraceRow>& rows,
                         const std::string& path) {
  TraceLayout layout;
  int32_t max_rank = 0;
  for (const auto& row : rows) max_rank = std::max(max_rank, row.rank);
  const std::string* split = string_attribute(attrs, "layer_split");
  layout.stages = split ? static_cast<int32_t>(split_commas(*split).size()) : max_rank + 1;
  if (const std::string* hosts = string_attribute(attrs, "hosts")) layout.hosts = split_commas(*hosts);
  if (layout.stages < 1)
    throw InputError("results file " + path + ": attribute layer_split: expected one entry per stage, found '" +
                     (split ? *split : std::string()) + "'");
  if (!layout.hosts.empty() && static_cast<int32_t>(layout.hosts.size()) <= max_rank)
    throw InputError("results file " + path + ": attribute hosts: expected a host for each of the trace's " +
                     std::to_string(max_rank + 1) + " ranks, found " + std::to_string(layout.hosts.size()));
  if (!layout.hosts.empty() && layout.hosts.size() % static_cast<size_t>(layout.stages) != 0)
    throw InputError("results file " + path + ": expected the " + std::to_string(layout.hosts.size()) +
                     " ranks of attribute hosts to be whole replicas of the " + std::to_string(layout.stages) +
                     " stages in layer_split");
  return layout;
}

nlohmann::json chrome_trace_events(const std::vector<TraceRow>& rows, const TraceLayout& layout) {
  nlohmann::json events = nlohmann::json::array();
  std::set<int32_t> ranks;
  for (const auto& row : rows) ranks.insert(row.rank);
  for (int32_t rank : ranks) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", process_name(rank, layout)}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"args", {{"sort_index", rank}}}});
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0},
                      {"args", {{"name", "rank " + std::to_string(rank)}}}});
  }
  // A micro-batch's forward hop leaves stage s in its send interval and arrives in stage s+1's recv
  // interval; ids are unique within a replica, so (rank, micro-batch) names each end. First rows win.
  std::map<std::pair<int32_t, int64_t>, const TraceRow*> sends, receives;
  for (const auto& row : rows) {
    events.push_back({{"name", trace_phase_name(row.phase)},
                      {"ph", "X"},
                      {"ts", row.start * kMicrosecondsPerSecond},
                      {"dur", std::max(0.0, row.end - row.start) * kMicrosecondsPerSecond},
                      {"pid", row.rank},
                      {"tid", 0},
                      {"args", {{"microbatch", row.microbatch}, {"tokens", row.tokens}, {"bytes", row.bytes}}}});
    if (row.microbatch < 0) continue;
    if (row.phase == TracePhase::Send) sends.emplace(std::make_pair(row.rank, row.microbatch), &row);
    if (row.phase == TracePhase::Recv) receives.emplace(std::make_pair(row.rank, row.microbatch), &row);
  }
  int64_t flow_id = 0;
  for (const auto& [key, send] : sends) {
    const auto [rank, microbatch] = key;
    if (rank % layout.stages == layout.stages - 1) continue;  // the last stage sends results back, not on
    const auto arrival = receives.find({rank + 1, microbatch});
    if (arrival == receives.end()) continue;
    const std::string name = "micro-batch " + std::to_string(microbatch);
    events.push_back({{"name", name}, {"cat", "hop"}, {"ph", "s"}, {"id", flow_id}, {"pid", rank}, {"tid", 0},
                      {"ts", send->start * kMicrosecondsPerSecond}});
    events.push_back({{"name", name}, {"cat", "hop"}, {"ph", "f"}, {"bp", "e"}, {"id", flow_id}, {"pid", rank + 1},
                      {"tid", 0}, {"ts", arrival->second->start * kMicrosecondsPerSecond}});
    ++flow_id;
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace glacier::io
