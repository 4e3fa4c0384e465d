// Which cores each MPI rank on a host uses (--bind core|numa|none) and pinning the process and its
// compute threads to them. Binding failures (e.g. refused in a container) are warnings, never fatal.
#pragma once
#include <string>
#include <vector>

#include "sys/topology.h"

namespace glacier::sys {

// --bind: core splits the host's cores into contiguous groups, one a rank; numa splits whole NUMA nodes
// among the ranks; none binds nothing.
enum class Binding { Core, Numa, None };

struct BindingPlan {
  std::vector<int> cores;  // OS index of the first PU of each core this rank uses; empty for "none"
  std::string description; // for logs: "cores 1", "cores 0-3", "numa 0 (cores 0-7)" or "none"
};

// A half-open range [begin, end) of item positions.
struct IndexRange {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
};

// Part `part` of n_items split into n_parts contiguous runs whose sizes differ by at most one (the
// first runs get the extra items). With more parts than items, parts share items round-robin:
// part p gets the single item p % n_items. n_items == 0 gives an empty range.
IndexRange split_evenly(int n_items, int n_parts, int part);

// "0-3,6,8-9" for {0,1,2,3,6,8,9}; input need not be sorted, duplicates are dropped; "" when empty.
std::string format_index_list(std::vector<int> indices);

// The plan for rank local_rank of local_size ranks on this host. threads (<= 0: not chosen yet) only
// serves to warn when it exceeds the plan's cores.
BindingPlan plan_binding(Binding mode, int local_rank, int local_size, int threads);
// The same planning on a given layout (tests use synthetic hosts).
BindingPlan plan_binding_on(const HostLayout& host, Binding mode, int local_rank, int local_size, int threads);

// Binds the whole process to the union of the plan's cores; no-op for an empty plan. Returns false
// (after a warning) when the OS refused; callers may ignore it, running unbound is correct, only slower.
bool bind_this_process(const BindingPlan& plan);
// Binds the calling thread to the plan's core thread_index % n; no-op for an empty plan. Returns
// false (after a warning) when the OS refused.
bool bind_this_thread(const BindingPlan& plan, int thread_index);

// Threads a rank should run: the plan's core count, or for an unbound plan its share of the host's
// cores (at least 1).
int default_threads(const BindingPlan& plan, int local_rank, int local_size);
// Physical cores on this host (hwloc's view of the cores this process may use).
int host_core_count();
// Hardware threads (PUs) on this host that the process may use: the most threads that can run at once.
int host_hardware_thread_count();

}  // namespace glacier::sys
