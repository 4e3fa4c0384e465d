// Binding plans (which cores a rank uses) and pinning through hwloc. Planning is plain arithmetic on
// a HostLayout so it can be tested on synthetic hosts; only the bind_* calls touch the OS.
#include "sys/binding.h"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/log.h"

namespace glacier::sys {
namespace {

std::vector<int> cores_in_range(const HostLayout& host, IndexRange r) {
  std::vector<int> out;
  for (int i = r.begin; i < r.end; ++i) out.push_back(host.cores[static_cast<size_t>(i)].os_index);
  return out;
}

BindingPlan plan_cores(const HostLayout& host, int local_rank, int local_size) {
  BindingPlan plan;
  plan.cores = cores_in_range(host, split_evenly(static_cast<int>(host.cores.size()), local_size, local_rank));
  plan.description = "cores " + format_index_list(plan.cores);
  return plan;
}

BindingPlan plan_numa(const HostLayout& host, int local_rank, int local_size) {
  // Memory-only nodes (no cores) would leave a rank with nothing to run on: split only nodes with cores.
  std::vector<int> nodes_with_cores;
  for (size_t n = 0; n < host.numa_os_indices.size(); ++n) {
    bool has_core = std::any_of(host.cores.begin(), host.cores.end(),
                                [&](const CoreInfo& c) { return c.numa == static_cast<int>(n); });
    if (has_core) nodes_with_cores.push_back(static_cast<int>(n));
  }
  IndexRange r = split_evenly(static_cast<int>(nodes_with_cores.size()), local_size, local_rank);
  BindingPlan plan;
  std::vector<int> node_os_indices;
  for (int i = r.begin; i < r.end; ++i) {
    int node = nodes_with_cores[static_cast<size_t>(i)];
    node_os_indices.push_back(host.numa_os_indices[static_cast<size_t>(node)]);
    for (const CoreInfo& c : host.cores) {
      if (c.numa == node) plan.cores.push_back(c.os_index);
    }
  }
  plan.description = "numa " + format_index_list(node_os_indices) + " (cores " + format_index_list(plan.cores) + ")";
  return plan;
}

const CoreInfo* find_core(const HostLayout& host, int os_index) {
  for (const CoreInfo& c : host.cores) {
    if (c.os_index == os_index) return &c;
  }
  return nullptr;
}

// Sets the PUs of the given cores in a fresh hwloc bitmap (the caller frees it).
hwloc_bitmap_t cpuset_of_cores(const HostLayout& host, const std::vector<int>& cores) {
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  GLACIER_ASSERT(set != nullptr, "hwloc_bitmap_alloc failed");
  for (int os_index : cores) {
    const CoreInfo* core = find_core(host, os_index);
    GLACIER_ASSERT(core != nullptr, "binding plan names core " + std::to_string(os_index) + " that this host lacks");
    for (int pu : core->pu_os_indices) hwloc_bitmap_set(set, static_cast<unsigned>(pu));
  }
  return set;
}

// Binding is an optimisation: when the OS refuses it (containers, restricted cpusets) we run unbound.
bool bind_cores(const std::vector<int>& cores, int flags, const std::string& what) {
  const HostTopology& topo = HostTopology::instance();
  if (!topo.handle()) {
    GLACIER_LOG_WARN("not binding %s to cores %s: no hwloc topology", what.c_str(), format_index_list(cores).c_str());
    return false;
  }
  hwloc_bitmap_t set = cpuset_of_cores(topo.layout(), cores);
  bool bound = hwloc_set_cpubind(topo.handle(), set, flags) == 0;
  if (!bound) {
    int err = errno;
    GLACIER_LOG_WARN("binding %s to cores %s was refused (%s); running unbound", what.c_str(),
                     format_index_list(cores).c_str(), std::strerror(err));
  }
  hwloc_bitmap_free(set);
  return bound;
}

}  // namespace

IndexRange split_evenly(int n_items, int n_parts, int part) {
  GLACIER_ASSERT(n_items >= 0, "split_evenly: negative item count " + std::to_string(n_items));
  GLACIER_ASSERT(n_parts >= 1 && part >= 0 && part < n_parts,
                 "split_evenly: part " + std::to_string(part) + " of " + std::to_string(n_parts));
  if (n_items == 0) return {0, 0};
  if (n_parts > n_items) {
    int item = part % n_items;
    return {item, item + 1};
  }
  int base = n_items / n_parts;
  int extra = n_items % n_parts;
  int begin = part * base + std::min(part, extra);
  return {begin, begin + base + (part < extra ? 1 : 0)};
}

std::string format_index_list(std::vector<int> indices) {
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  std::string out;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(indices[i]);
    if (j > i) out += '-' + std::to_string(indices[j]);
    i = j + 1;
  }
  return out;
}

BindingPlan plan_binding_on(const HostLayout& host, Binding mode, int local_rank, int local_size, int threads) {
  GLACIER_ASSERT(local_size >= 1 && local_rank >= 0 && local_rank < local_size,
                 "plan_binding: local rank " + std::to_string(local_rank) + " of " + std::to_string(local_size));
  BindingPlan plan;
  switch (mode) {
    case Binding::Core:
      plan = plan_cores(host, local_rank, local_size);
      break;
    case Binding::Numa:
      plan = plan_numa(host, local_rank, local_size);
      break;
    case Binding::None:
      plan.description = "none";
      break;
  }
  if (!plan.cores.empty() && threads > static_cast<int>(plan.cores.size())) {
    GLACIER_LOG_WARN("%d threads on %zu bound cores (%s): threads will share cores", threads, plan.cores.size(),
                     plan.description.c_str());
  }
  return plan;
}

BindingPlan plan_binding(Binding mode, int local_rank, int local_size, int threads) {
  return plan_binding_on(HostTopology::instance().layout(), mode, local_rank, local_size, threads);
}

bool bind_this_process(const BindingPlan& plan) {
  if (plan.cores.empty()) return true;
  return bind_cores(plan.cores, HWLOC_CPUBIND_PROCESS, "this process");
}

bool bind_this_thread(const BindingPlan& plan, int thread_index) {
  if (plan.cores.empty()) return true;
  GLACIER_ASSERT(thread_index >= 0, "bind_this_thread: negative thread index " + std::to_string(thread_index));
  int core = plan.cores[static_cast<size_t>(thread_index) % plan.cores.size()];
  return bind_cores({core}, HWLOC_CPUBIND_THREAD, "thread " + std::to_string(thread_index));
}

int default_threads(const BindingPlan& plan, int local_rank, int local_size) {
  if (!plan.cores.empty()) return static_cast<int>(plan.cores.size());
  return std::max(1, split_evenly(host_core_count(), local_size, local_rank).size());
}

int host_core_count() { return static_cast<int>(HostTopology::instance().layout().cores.size()); }

int host_hardware_thread_count() {
  size_t pus = 0;
  for (const CoreInfo& c : HostTopology::instance().layout().cores) pus += c.pu_os_indices.size();
  return static_cast<int>(std::max<size_t>(pus, 1));
}

}  // namespace glacier::sys
