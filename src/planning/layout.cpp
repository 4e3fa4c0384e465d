// Replicas, layer split and slots from the options and the hosts' memory; the refusals name the option
// or the host at fault.
#include "planning/layout.h"

#include <algorithm>
#include <map>

#include "compute/kv_cache.h"
#include "planning/partition.h"
#include "planning/partition_choice.h"
#include "util/error.h"

namespace glacier::planning {

HostMemory host_memory(const std::vector<std::string>& hosts, const std::vector<uint64_t>& budgets) {
  HostMemory m;
  m.hosts = hosts;
  std::map<std::string, uint64_t> smallest;
  for (size_t r = 0; r < hosts.size(); ++r) {
    auto [it, fresh] = smallest.emplace(hosts[r], budgets[r]);
    if (!fresh) it->second = std::min(it->second, budgets[r]);
  }
  for (const std::string& h : hosts) m.available.push_back(smallest[h]);
  return m;
}

std::vector<model::LayerRange> layer_split(const SplitRequest& req, const MemoryShape& shape, int n_stages,
                                           const HostMemory& mem) {
  if (!req.layers.empty()) {
    planning::check_layer_split(req.layers, shape.cfg.n_layer, n_stages);
    return req.layers;
  }
  if (req.partition == Partition::Bytes) return planning::partition_by_bytes(shape.bytes, n_stages);
  try {
    return memory_partition(shape, stage_memory_caps(mem.hosts, mem.available, n_stages)).split;
  } catch (const InputError&) {
    return planning::partition_by_bytes(shape.bytes, n_stages);  // throws itself for more stages than layers
  }
}

int auto_replicas(const SplitRequest& req, const std::string& model_path, const MemoryShape& shape,
                  const HostMemory& mem, int world) {
  for (int stages = 1; stages <= world; ++stages) {
    if (world % stages != 0 || stages > shape.cfg.n_layer) continue;
    const auto split = layer_split(req, shape, stages, mem);
    if (!check_memory_fit(model_path, shape, split, mem.hosts, mem.available)) return world / stages;
  }
  return 1;
}

Layout plan_layout(const SplitRequest& req, const std::string& model_path, const MemoryShape& shape,
                   const HostMemory& mem, int world, const std::vector<model::LayerRange>& fixed_split) {
  Layout l;
  if (!fixed_split.empty()) {
    l.replicas = world / static_cast<int>(fixed_split.size());
  } else {
    l.replicas = req.replicas == 0 ? auto_replicas(req, model_path, shape, mem, world) : req.replicas;
  }
  if (world % l.replicas != 0)
    throw InputError("option --replicas: expected a divisor of the " + std::to_string(world) +
                     " ranks in the job, found " + std::to_string(l.replicas));
  l.n_stages = world / l.replicas;
  l.split = !fixed_split.empty() ? fixed_split : layer_split(req, shape, l.n_stages, mem);
  if (auto error = check_memory_fit(model_path, shape, l.split, mem.hosts, mem.available)) throw InputError(*error);
  return l;
}

void check_fixed_split_options(const SplitRequest& req, const std::string& partition_from,
                               const std::string& model_path, int set_stages, int world, int expert_parallel) {
  const std::string what = model_path + " (a shard set of " + std::to_string(set_stages) + " stages)";
  // The messages name the ranks the user launched, not the ring's share of them under --expert-parallel.
  const bool experts = expert_parallel > 1;
  const std::string launched = std::to_string(world * expert_parallel) + " ranks";
  if (world % set_stages != 0)
    throw InputError("option --model " + what + ": expected a rank count that is a multiple of its stages" +
                     (experts ? " x --expert-parallel (" + std::to_string(set_stages) + " x " +
                                    std::to_string(expert_parallel) + ")"
                              : std::string()) +
                     ", found " + launched);
  const int replicas = world / set_stages;
  if (req.replicas != 0 && req.replicas != replicas)
    throw InputError("option --replicas: expected " + std::to_string(replicas) + " or auto (" + launched + " over " +
                     (experts ? "--expert-parallel " + std::to_string(expert_parallel) + " and " : std::string()) +
                     "the " + std::to_string(set_stages) + " stages of " + model_path + "), found " +
                     std::to_string(req.replicas));
  if (!req.layers.empty() || !partition_from.empty() || req.partition != Partition::Bytes)
    throw InputError("options --layers / --partition / --partition-from: expected none with --model " + what +
                     ", whose split is fixed when it is cut (glacier_shard), found them given");
}

StageFill stage_fill(const MemoryShape& shape, const std::vector<model::LayerRange>& split, const HostMemory& mem) {
  const int n_stages = static_cast<int>(split.size());
  const std::vector<uint64_t> caps = stage_memory_caps(mem.hosts, mem.available, n_stages);
  StageFill f;
  for (int st = 0; st < n_stages; ++st) {
    const uint64_t need =
        rank_memory_need(shape, split[static_cast<size_t>(st)], st == 0, st == n_stages - 1, n_stages).total();
    const uint64_t cap = caps[static_cast<size_t>(st)];
    f.within = f.within && need <= cap;
    f.percent.push_back(100.0 * need / std::max<uint64_t>(cap, 1));
  }
  return f;
}

int32_t default_slots(const model::ModelConfig& cfg, model::LayerRange layers, int32_t n_ctx, uint64_t budget) {
  const uint64_t per_slot = compute::KvCache::bytes_needed(cfg, std::max(1, layers.size()), 1, n_ctx);
  const uint64_t fit = budget / 2 / std::max<uint64_t>(per_slot, 1);
  return static_cast<int32_t>(std::clamp<uint64_t>(fit, 1, kDefaultSlots));
}

}  // namespace glacier::planning
