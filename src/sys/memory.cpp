// Memory figures from /proc and cgroupfs: parsers for their text formats, and the cgroup walk that
// finds the tightest limit over a process's cgroup and its ancestors.
#include "sys/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "util/error.h"

namespace glacier::sys {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kKiB = 1024;

// /proc and cgroupfs files report a size of 0, so read them as a stream rather than by size.
std::optional<std::string> read_small_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return out.str();
}

std::string_view trim(std::string_view s) {
  const char* space = " \t\r\n";
  size_t b = s.find_first_not_of(space);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(space);
  return s.substr(b, e - b + 1);
}

std::optional<uint64_t> parse_u64(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

// The value of "Key: <number> kB" (or a bare number, meaning bytes) in /proc/meminfo or
// /proc/<pid>/status, converted to bytes.
std::optional<uint64_t> find_kb_field(const std::string& text, const std::string& key, const std::string& source) {
  auto lines = split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || line.substr(0, colon) != key) continue;
    std::string_view value = trim(line.substr(colon + 1));
    uint64_t scale = 1;
    if (value.size() >= 2 && value.substr(value.size() - 2) == "kB") {
      scale = kKiB;
      value = trim(value.substr(0, value.size() - 2));
    }
    auto number = parse_u64(value);
    if (!number || *number > std::numeric_limits<uint64_t>::max() / scale) {
      throw InputError(source + " line " + std::to_string(i + 1) + ": key '" + key +
                       "': expected '<number> kB', found '" + std::string(trim(line.substr(colon + 1))) + "'");
    }
    return *number * scale;
  }
  return std::nullopt;
}

// Ancestors of a cgroup path from the leaf up to the root: "/a/b" gives "a/b", "a", "".
std::vector<fs::path> self_and_ancestors(const std::string& cgroup_path) {
  std::vector<fs::path> chain;
  fs::path p = fs::path(cgroup_path).relative_path();
  while (!p.empty()) {
    chain.push_back(p);
    if (p.parent_path() == p) break;
    p = p.parent_path();
  }
  chain.emplace_back();
  return chain;
}

// The file names of one cgroup version's memory controller.
struct MemoryControllerFiles {
  const char* limit;
  const char* usage;
  const char* inactive_file_key;  // in memory.stat; reclaimable page cache
};
constexpr MemoryControllerFiles kUnifiedFiles{"memory.max", "memory.current", "inactive_file"};
constexpr MemoryControllerFiles kV1Files{"memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"};

std::optional<uint64_t> stat_value(const std::string& stat_text, const std::string& key) {
  for (std::string_view line : split_lines(stat_text)) {
    size_t space = line.find(' ');
    if (space == std::string_view::npos || line.substr(0, space) != key) continue;
    return parse_u64(trim(line.substr(space + 1)));
  }
  return std::nullopt;
}

// Limit and usage of one cgroup directory; nullopt when it has no limit file or no limit.
struct CgroupFigures {
  uint64_t limit = 0;
  uint64_t usage = 0;
};
std::optional<CgroupFigures> read_cgroup(const fs::path& dir, const MemoryControllerFiles& files) {
  auto limit_text = read_small_file(dir / files.limit);
  if (!limit_text) return std::nullopt;
  auto limit = parse_cgroup_limit(*limit_text, (dir / files.limit).string());
  if (!limit) return std::nullopt;
  CgroupFigures fig{*limit, 0};
  if (auto usage_text = read_small_file(dir / files.usage)) {
    auto usage = parse_u64(trim(*usage_text));
    if (!usage) {
      throw InputError((dir / files.usage).string() + ": expected a byte count, found '" +
                       std::string(trim(*usage_text)) + "'");
    }
    fig.usage = *usage;
    // Usage counts page cache (including our mmapped weights); inactive file pages are reclaimed
    // before the limit bites, so they are not a real obstacle to allocation.
    if (auto stat_text = read_small_file(dir / "memory.stat")) {
      if (auto inactive = stat_value(*stat_text, files.inactive_file_key)) fig.usage -= std::min(*inactive, fig.usage);
    }
  }
  return fig;
}

// Visits every limited cgroup that applies to the process, under both hierarchies.
template <typename Visit>
void for_each_limited_cgroup(const fs::path& root, const CgroupMembership& m, Visit visit) {
  if (m.unified_path) {
    // Pure v2 mounts the unified hierarchy at the root; the hybrid layout puts it under "unified".
    for (const fs::path& base : {root, root / "unified"}) {
      for (const fs::path& rel : self_and_ancestors(*m.unified_path)) {
        if (auto fig = read_cgroup(base / rel, kUnifiedFiles)) visit(*fig);
      }
    }
  }
  if (m.v1_memory_path) {
    for (const fs::path& rel : self_and_ancestors(*m.v1_memory_path)) {
      if (auto fig = read_cgroup(root / "memory" / rel, kV1Files)) visit(*fig);
    }
  }
}

CgroupMembership own_cgroup_membership() {
  auto text = read_small_file("/proc/self/cgroup");
  return text ? parse_cgroup_membership(*text) : CgroupMembership{};
}

const fs::path kCgroupfsRoot = "/sys/fs/cgroup";

std::optional<MemInfo> read_meminfo() {
  auto text = read_small_file("/proc/meminfo");
  if (!text) return std::nullopt;
  return parse_meminfo(*text);
}

uint64_t sysconf_bytes(int pages_name) {
  long pages = sysconf(pages_name);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

}  // namespace

MemInfo parse_meminfo(const std::string& text, const std::string& source) {
  MemInfo info;
  auto total = find_kb_field(text, "MemTotal", source);
  auto available = find_kb_field(text, "MemAvailable", source);
  if (!total) throw InputError(source + ": key 'MemTotal': expected a line 'MemTotal: <number> kB', found none");
  if (!available) {
    throw InputError(source + ": key 'MemAvailable': expected a line 'MemAvailable: <number> kB' (Linux 3.14+), found none");
  }
  info.total_bytes = *total;
  info.available_bytes = *available;
  return info;
}

std::optional<uint64_t> parse_status_field_bytes(const std::string& text, const std::string& key,
                                                 const std::string& source) {
  return find_kb_field(text, key, source);
}

std::optional<uint64_t> parse_cgroup_limit(const std::string& text, const std::string& source) {
  std::string_view value = trim(text);
  if (value == "max") return std::nullopt;
  auto number = parse_u64(value);
  if (!number) throw InputError(source + ": expected a byte count or 'max', found '" + std::string(value) + "'");
  return number;
}

CgroupMembership parse_cgroup_membership(const std::string& text) {
  CgroupMembership m;
  for (std::string_view line : split_lines(text)) {
    // "hierarchy-id:controller-list:path"; the path itself may contain ':'.
    size_t first = line.find(':');
    if (first == std::string_view::npos) continue;
    size_t second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    std::string_view id = line.substr(0, first);
    std::string_view controllers = line.substr(first + 1, second - first - 1);
    std::string path(line.substr(second + 1));
    if (id == "0" && controllers.empty()) {
      m.unified_path = path;
      continue;
    }
    size_t start = 0;
    while (start <= controllers.size()) {
      size_t comma = controllers.find(',', start);
      if (comma == std::string_view::npos) comma = controllers.size();
      if (controllers.substr(start, comma - start) == "memory") m.v1_memory_path = path;
      start = comma + 1;
    }
  }
  return m;
}

std::optional<uint64_t> cgroup_headroom_bytes(const std::filesystem::path& root, const CgroupMembership& m) {
  std::optional<uint64_t> best;
  for_each_limited_cgroup(root, m, [&](const CgroupFigures& fig) {
    uint64_t headroom = fig.limit > fig.usage ? fig.limit - fig.usage : 0;
    best = best ? std::min(*best, headroom) : headroom;
  });
  return best;
}

std::optional<uint64_t> cgroup_limit_bytes(const std::filesystem::path& root, const CgroupMembership& m) {
  std::optional<uint64_t> best;
  for_each_limited_cgroup(root, m, [&](const CgroupFigures& fig) { best = best ? std::min(*best, fig.limit) : fig.limit; });
  return best;
}

uint64_t available_memory_bytes() {
  auto info = read_meminfo();
  // Without /proc, free pages is the closest conservative figure.
  uint64_t available = info ? info->available_bytes : sysconf_bytes(_SC_AVPHYS_PAGES);
  if (auto headroom = cgroup_headroom_bytes(kCgroupfsRoot, own_cgroup_membership())) {
    available = std::min(available, *headroom);
  }
  return available;
}

uint64_t total_memory_bytes() {
  auto info = read_meminfo();
  uint64_t total = info ? info->total_bytes : sysconf_bytes(_SC_PHYS_PAGES);
  if (auto limit = cgroup_limit_bytes(kCgroupfsRoot, own_cgroup_membership())) total = std::min(total, *limit);
  return total;
}

uint64_t peak_rss_bytes() {
  if (auto text = read_small_file("/proc/self/status")) {
    if (auto hwm = parse_status_field_bytes(*text, "VmHWM")) return *hwm;
  }
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<uint64_t>(usage.ru_maxrss) * kKiB;  // Linux reports ru_maxrss in KiB
}

uint64_t current_rss_bytes() {
  if (auto text = read_small_file("/proc/self/status")) {
    if (auto rss = parse_status_field_bytes(*text, "VmRSS")) return *rss;
  }
  return 0;
}

}  // namespace glacier::sys
