// The host's cores and NUMA nodes as plain data, read once from hwloc and kept for the process's life.
// hwloc.h stays out of this header so that only src/sys/*.cpp depends on it.
#pragma once
#include <vector>

struct hwloc_topology;  // hwloc's opaque topology type

namespace glacier::sys {

struct CoreInfo {
  int os_index = 0;               // OS index of the core's first PU: what the OS and `taskset` call the CPU
  std::vector<int> pu_os_indices; // every PU (hardware thread) of the core
  int numa = 0;                   // position of the core's NUMA node in HostLayout::numa_os_indices
};

// Cores in hwloc's logical (locality) order, so neighbours in the list share caches.
struct HostLayout {
  std::vector<CoreInfo> cores;
  std::vector<int> numa_os_indices;  // at least one entry
};

// Owns the hwloc topology: loaded on first use, destroyed at exit.
class HostTopology {
 public:
  static const HostTopology& instance();

  const HostLayout& layout() const { return layout_; }
  // nullptr when hwloc failed to load (then the layout comes from sysconf and binding is skipped).
  hwloc_topology* handle() const { return topology_; }

  HostTopology(const HostTopology&) = delete;
  HostTopology& operator=(const HostTopology&) = delete;
  ~HostTopology();

 private:
  HostTopology();
  hwloc_topology* topology_ = nullptr;
  HostLayout layout_;
};

}  // namespace glacier::sys
