// Reads the host's cores and NUMA nodes from hwloc once; falls back to sysconf's CPU count (one PU a
// core, one NUMA node) when hwloc cannot load, so planning still works and binding is skipped.
#include "sys/topology.h"

#include <hwloc.h>
#include <unistd.h>

#include "util/log.h"

namespace glacier::sys {
namespace {

std::vector<int> os_indices_of(hwloc_const_cpuset_t set) {
  std::vector<int> out;
  for (int id = hwloc_bitmap_first(set); id >= 0; id = hwloc_bitmap_next(set, id)) out.push_back(id);
  return out;
}

HostLayout layout_from_hwloc(hwloc_topology_t topo) {
  HostLayout layout;
  std::vector<hwloc_obj_t> numa_nodes;
  for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n));) {
    numa_nodes.push_back(n);
    layout.numa_os_indices.push_back(static_cast<int>(n->os_index));
  }
  if (layout.numa_os_indices.empty()) layout.numa_os_indices.push_back(0);

  // Some platforms expose no Core objects; then each PU stands for a core.
  hwloc_obj_type_t core_type = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  for (hwloc_obj_t c = nullptr; (c = hwloc_get_next_obj_by_type(topo, core_type, c));) {
    CoreInfo core;
    core.pu_os_indices = os_indices_of(c->cpuset);
    if (core.pu_os_indices.empty()) continue;  // a core with no usable PU cannot run anything
    core.os_index = core.pu_os_indices.front();
    for (size_t i = 0; i < numa_nodes.size(); ++i) {
      if (hwloc_bitmap_intersects(c->cpuset, numa_nodes[i]->cpuset)) {
        core.numa = static_cast<int>(i);
        break;
      }
    }
    layout.cores.push_back(std::move(core));
  }
  return layout;
}

HostLayout layout_from_sysconf() {
  HostLayout layout;
  layout.numa_os_indices.push_back(0);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  for (int i = 0; i < (n > 0 ? n : 1); ++i) layout.cores.push_back(CoreInfo{i, {i}, 0});
  return layout;
}

}  // namespace

const HostTopology& HostTopology::instance() {
  static const HostTopology topology;  // C++ guarantees one thread-safe load, and destruction at exit
  return topology;
}

HostTopology::HostTopology() {
  hwloc_topology_t topo = nullptr;
  if (hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0) {
    topology_ = topo;
    layout_ = layout_from_hwloc(topo);
  } else {
    if (topo) hwloc_topology_destroy(topo);
    GLACIER_LOG_WARN("hwloc could not load the host topology; assuming one core per online CPU and no binding");
  }
  if (layout_.cores.empty()) layout_ = layout_from_sysconf();
}

HostTopology::~HostTopology() {
  if (topology_) hwloc_topology_destroy(topology_);
}

}  // namespace glacier::sys
