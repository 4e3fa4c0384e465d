// Partitioning by dynamic programming over prefix sums: exact minimum of the heaviest (or slowest)
// stage, ties broken towards earlier cuts, so every rank computes the same split independently.
#include "planning/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "util/error.h"

namespace glacier::planning {

// The planner with every stage equally fast and unlimited memory, work counted in bytes (sums of whole
// bytes stay exact as doubles below 2^53, 8 PiB, so the comparisons are the integer ones).
std::vector<model::LayerRange> partition_by_bytes(const model::WeightBytes& b, int n_stages) {
  const size_t L = b.per_layer.size(), P = n_stages < 0 ? 0 : static_cast<size_t>(n_stages);
  PartitionCosts c;
  c.layer_work.assign(b.per_layer.begin(), b.per_layer.end());
  c.stage_fixed_work.assign(P, 0.0);
  if (P > 0) c.stage_fixed_work.back() = static_cast<double>(b.head);
  c.stage_seconds_per_work.assign(P, 1.0);
  c.layer_memory.assign(L, 0);
  c.stage_fixed_memory.assign(P, 0);
  c.stage_memory_cap.assign(P, std::numeric_limits<uint64_t>::max());
  return plan_partition(c).split;
}

double PartitionPlan::bottleneck() const {
  return stage_time.empty() ? 0.0 : *std::max_element(stage_time.begin(), stage_time.end());
}

namespace {

// For the refusal message: the most layers any window of consecutive layers gives stage s within its cap.
int most_layers_that_fit(const PartitionCosts& c, const std::vector<uint64_t>& mem_prefix, size_t s) {
  const int L = static_cast<int>(c.layer_work.size());
  int most = 0;
  for (int first = 0; first < L; ++first)
    for (int last = first + most + 1; last <= L; ++last) {
      if (c.stage_fixed_memory[s] + mem_prefix[last] - mem_prefix[first] > c.stage_memory_cap[s]) break;
      most = last - first;
    }
  return most;
}

std::string memory_refusal(const PartitionCosts& c, const std::vector<uint64_t>& mem_prefix) {
  const size_t P = c.stage_seconds_per_work.size();
  std::string s = "no contiguous split of the " + std::to_string(c.layer_work.size()) + " layers over " +
                  std::to_string(P) + " stages fits every stage's memory; the most layers each stage's memory holds: ";
  for (size_t st = 0; st < P; ++st) {
    if (st > 0) s += ", ";
    s += std::to_string(most_layers_that_fit(c, mem_prefix, st));
  }
  return s;
}

}  // namespace

PartitionPlan plan_partition(const PartitionCosts& c) {
  const int L = static_cast<int>(c.layer_work.size());
  const int P = static_cast<int>(c.stage_seconds_per_work.size());
  GLACIER_ASSERT(c.layer_memory.size() == c.layer_work.size(), "one memory figure per layer");
  GLACIER_ASSERT(c.stage_fixed_work.size() == static_cast<size_t>(P) && c.stage_fixed_memory.size() == static_cast<size_t>(P) &&
                     c.stage_memory_cap.size() == static_cast<size_t>(P),
                 "one work, memory and cap figure per stage");
  for (double v : c.stage_seconds_per_work) GLACIER_ASSERT(std::isfinite(v) && v >= 0.0, "stage speeds finite, >= 0");
  if (P < 1 || P > L)
    throw InputError("pipeline: expected at most one rank per layer (this model has " + std::to_string(L) +
                     " layers), found " + std::to_string(P) + " ranks in the pipeline; run with -np " +
                     std::to_string(L) + " or fewer");
  std::vector<double> work(static_cast<size_t>(L) + 1, 0.0);
  std::vector<uint64_t> mem(static_cast<size_t>(L) + 1, 0);
  for (int i = 0; i < L; ++i) {
    work[i + 1] = work[i] + c.layer_work[i];
    mem[i + 1] = mem[i] + c.layer_memory[i];
  }
  auto stage_time = [&](int first, int last, int s) {
    return c.stage_seconds_per_work[s] * (c.stage_fixed_work[s] + (work[last] - work[first]));
  };
  auto stage_memory = [&](int first, int last, int s) { return c.stage_fixed_memory[s] + mem[last] - mem[first]; };
  const double inf = std::numeric_limits<double>::infinity();
  // best[s][i]: the smallest possible slowest stage when stages 0..s-1 cover layers 0..i-1 within memory.
  std::vector<std::vector<double>> best(static_cast<size_t>(P) + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> cut(static_cast<size_t>(P) + 1, std::vector<int>(L + 1, -1));
  best[0][0] = 0.0;
  for (int s = 1; s <= P; ++s)
    for (int i = s; i <= L - (P - s); ++i)
      for (int j = s - 1; j < i; ++j) {
        if (best[s - 1][j] == inf) continue;  // no split of layers 0..j-1 fits
        if (stage_memory(j, i, s - 1) > c.stage_memory_cap[s - 1]) continue;
        const double t = std::max(best[s - 1][j], stage_time(j, i, s - 1));
        if (cut[s][i] < 0 || t < best[s][i]) {
          best[s][i] = t;
          cut[s][i] = j;
        }
      }
  if (cut[P][L] < 0) throw InputError(memory_refusal(c, mem));
  PartitionPlan plan;
  plan.split.resize(static_cast<size_t>(P));
  int end = L;
  for (int s = P; s >= 1; --s) {
    const int start = cut[s][end];
    GLACIER_ASSERT(start >= 0, "partition found");
    plan.split[s - 1] = {start, end};
    end = start;
  }
  for (int s = 0; s < P; ++s) {
    plan.stage_time.push_back(stage_time(plan.split[s].first, plan.split[s].last, s));
    plan.stage_memory.push_back(stage_memory(plan.split[s].first, plan.split[s].last, s));
  }
  return plan;
}

namespace {
[[noreturn]] void bad_layers(const std::string& spec, const std::string& expected, const std::string& found) {
  throw InputError("option --layers '" + spec + "': expected " + expected + ", found " + found);
}
}  // namespace

std::vector<model::LayerRange> parse_layer_ranges(const std::string& spec) {
  std::vector<model::LayerRange> split;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.find(':');
    int first = -1, last = -1;
    try {
      size_t used1 = 0, used2 = 0;
      if (colon == std::string::npos) throw std::invalid_argument("no colon");
      first = std::stoi(item.substr(0, colon), &used1);
      last = std::stoi(item.substr(colon + 1), &used2);
      if (used1 != colon || used2 != item.size() - colon - 1) throw std::invalid_argument("trailing text");
    } catch (const std::exception&) {
      bad_layers(spec, "ranges FIRST:LAST separated by commas", "'" + item + "'");
    }
    split.push_back({first, last});
  }
  return split;
}

void check_layer_split(const std::vector<model::LayerRange>& split, int32_t n_layer, int n_stages) {
  const std::string spec = format_layer_split(split);
  if (static_cast<int>(split.size()) != n_stages)
    bad_layers(spec, "one range per pipeline rank (" + std::to_string(n_stages) + ")", std::to_string(split.size()) + " ranges");
  int32_t expect = 0;
  for (const auto& r : split) {
    const std::string range = std::to_string(r.first) + ":" + std::to_string(r.last);
    if (r.first != expect) bad_layers(spec, "range starting at layer " + std::to_string(expect) + " (contiguous from 0)", range);
    if (r.last <= r.first) bad_layers(spec, "a non-empty range", range);
    expect = r.last;
  }
  if (expect != n_layer)
    bad_layers(spec, "ranges covering all " + std::to_string(n_layer) + " layers", "the last range ending at " + std::to_string(expect));
}

std::vector<model::LayerRange> parse_layer_split(const std::string& spec, int32_t n_layer, int n_stages) {
  std::vector<model::LayerRange> split = parse_layer_ranges(spec);
  check_layer_split(split, n_layer, n_stages);
  return split;
}

std::string format_layer_split(const std::vector<model::LayerRange>& split) {
  std::string s;
  for (const auto& r : split) {  // += only: GCC 12 warns falsely on "literal" + std::string chains
    if (!s.empty()) s += ',';
    s += std::to_string(r.first);
    s += ':';
    s += std::to_string(r.last);
  }
  return s;
}

std::vector<uint64_t> stage_bytes(const model::WeightBytes& b, const std::vector<model::LayerRange>& split) {
  std::vector<uint64_t> out;
  for (size_t s = 0; s < split.size(); ++s) {
    uint64_t bytes = 0;
    for (int32_t l = split[s].first; l < split[s].last; ++l) bytes += b.per_layer[l];
    if (s == 0) bytes += b.embedding;
    if (s + 1 == split.size()) bytes += b.head;
    out.push_back(bytes);
  }
  return out;
}

}  // namespace glacier::planning
