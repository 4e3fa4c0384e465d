// Memory fit: sums the needs of the ranks sharing a host, compares them with what the host offers, and
// when one does not fit searches the smallest pipeline (byte-balanced split, ranks as small as the
// tightest one here) that would.
#include "planning/memory_fit.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "compute/kv_cache.h"
#include "planning/partition.h"

namespace glacier::planning {
namespace {

// Floats a token keeps in a stage's working buffers: the residual stream and its normed copy, q/k/v
// and the attention output (about 4 x n_embd), the FFN's gate/up/act (3 x n_ff), with room to spare.
constexpr uint64_t kBufferFloatsPerEmbd = 8;
constexpr uint64_t kBufferFloatsPerFf = 3;

// GiB for real models, MiB for the small ones tests and home labs use.
std::string format_bytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

MemoryShape memory_shape(const model::ModelConfig& cfg, const model::WeightBytes& bytes, int32_t n_ctx, int32_t ubatch,
                         int32_t slots_option, int32_t decode_groups_option, uint64_t ring_bytes_per_micro_batch) {
  return {cfg,   bytes, std::max(slots_option > 0 ? slots_option : 1, decode_groups_option), n_ctx, ubatch,
          decode_groups_option, ring_bytes_per_micro_batch};
}

int32_t micro_batches_in_flight(int32_t decode_groups, int n_stages) {
  if (n_stages <= 1) return 1;
  return std::max(2 * n_stages, decode_groups > 0 ? decode_groups : n_stages);
}

RankMemoryNeed rank_memory_need(const MemoryShape& s, model::LayerRange layers, bool first, bool last, int n_stages) {
  RankMemoryNeed need;
  for (int32_t l = layers.first; l < layers.last; ++l) need.weights += s.bytes.per_layer[static_cast<size_t>(l)];
  if (first) need.weights += s.bytes.embedding;
  if (last) need.weights += s.bytes.head;
  need.kv_cache = compute::KvCache::bytes_needed(s.cfg, layers.size(), s.min_slots, s.n_ctx);
  const int32_t ff = std::max({s.cfg.n_ff, s.cfg.n_ff_expert, s.cfg.n_ff_shexp});
  uint64_t floats_per_token = kBufferFloatsPerEmbd * static_cast<uint64_t>(s.cfg.n_embd) +
                              kBufferFloatsPerFf * static_cast<uint64_t>(ff);
  if (last) floats_per_token += static_cast<uint64_t>(s.cfg.n_vocab);  // the logits of a micro-batch
  // Latent attention's q (n_head heads of key width, far wider than n_embd on DeepSeek V3), q's low-rank
  // rows, the latent rows and the attention output, per token.
  if (s.cfg.spec.mla)
    floats_per_token += static_cast<uint64_t>(s.cfg.q_dim()) + static_cast<uint64_t>(s.cfg.q_lora_rank) +
                        static_cast<uint64_t>(s.cfg.kv_cache_row_floats()) + static_cast<uint64_t>(s.cfg.attn_out_dim());
  need.buffers = floats_per_token * static_cast<uint64_t>(s.ubatch) * sizeof(float);
  // ... and one layer's attn_kv_b as floats (transformer_stage.cpp applies it to queries and latents).
  if (s.cfg.spec.mla && layers.size() > 0)
    need.buffers += static_cast<uint64_t>(s.cfg.n_head) * static_cast<uint64_t>(s.cfg.nope_dim() + s.cfg.v_head_dim) *
                    static_cast<uint64_t>(s.cfg.kv_lora_rank) * sizeof(float);
  // The driver's ring: each micro-batch in flight has a send buffer (activations at f32, the widest codec)
  // and a posted receive for its results. 64 decode groups of 512 tokens of a 4096-wide model are 512 MiB.
  if (first && n_stages > 1)
    need.buffers += static_cast<uint64_t>(micro_batches_in_flight(s.decode_groups, n_stages)) * s.ring_bytes_per_micro_batch;
  return need;
}

StageMemoryModel stage_memory_model(const MemoryShape& s, int n_stages) {
  StageMemoryModel m;
  for (int32_t l = 0; l < static_cast<int32_t>(s.bytes.per_layer.size()); ++l)
    m.per_layer.push_back(rank_memory_need(s, {l, l + 1}, false, false).total() -
                          rank_memory_need(s, {l, l}, false, false).total());
  for (int st = 0; st < n_stages; ++st)
    m.stage_fixed.push_back(rank_memory_need(s, {0, 0}, st == 0, st == n_stages - 1, n_stages).total());
  return m;
}

std::vector<uint64_t> rank_memory_caps(const std::vector<std::string>& hosts, const std::vector<uint64_t>& host_available) {
  std::map<std::string, uint64_t> ranks_on;
  for (const std::string& h : hosts) ranks_on[h] += 1;
  std::vector<uint64_t> caps;
  for (size_t r = 0; r < hosts.size(); ++r) caps.push_back(host_available[r] / ranks_on[hosts[r]]);
  return caps;
}

std::optional<std::string> check_memory_fit(const std::string& model_path, const MemoryShape& shape,
                                            const std::vector<model::LayerRange>& split,
                                            const std::vector<std::string>& hosts,
                                            const std::vector<uint64_t>& host_available) {
  const int n_stages = static_cast<int>(split.size());
  struct Host {
    uint64_t need = 0, available = 0;
    int ranks = 0;
    std::string layers;
  };
  std::map<std::string, Host> by_host;
  for (size_t r = 0; r < hosts.size(); ++r) {
    const int stage = static_cast<int>(r) % n_stages;  // replicas repeat the split over the ranks
    Host& h = by_host[hosts[r]];
    h.need += rank_memory_need(shape, split[static_cast<size_t>(stage)], stage == 0, stage == n_stages - 1, n_stages).total();
    h.available = host_available[r];
    h.ranks += 1;
    if (!h.layers.empty()) h.layers += ',';
    h.layers += planning::format_layer_split({split[static_cast<size_t>(stage)]});
  }
  const Host* worst = nullptr;
  std::string worst_name;
  uint64_t per_rank_capacity = UINT64_MAX;  // what the tightest host gives each of its ranks
  for (const auto& [name, h] : by_host) {
    per_rank_capacity = std::min(per_rank_capacity, h.available / static_cast<uint64_t>(h.ranks));
    if (h.need > h.available && (!worst || h.need - h.available > worst->need - worst->available)) {
      worst = &h;
      worst_name = name;
    }
  }
  if (!worst) return std::nullopt;

  std::string advice;
  for (int stages = 1; stages <= shape.cfg.n_layer; ++stages) {
    const auto trial = planning::partition_by_bytes(shape.bytes, stages);
    uint64_t heaviest = 0;
    for (int r = 0; r < stages; ++r)
      heaviest = std::max(heaviest, rank_memory_need(shape, trial[static_cast<size_t>(r)], r == 0, r == stages - 1, stages).total());
    if (heaviest <= per_rank_capacity) {
      advice = "it would fit on " + std::to_string(stages) + " ranks of " + format_bytes(per_rank_capacity) +
               " each (one rank a host, or hosts with more memory)";
      break;
    }
  }
  if (advice.empty())
    advice = "it does not fit even with one layer a rank on ranks of " + format_bytes(per_rank_capacity) +
             ": use a smaller quantization, a shorter --ctx, or hosts with more memory";
  return model_path + ": the model does not fit in memory: host " + worst_name + " runs " +
         std::to_string(worst->ranks) + (worst->ranks == 1 ? " rank" : " ranks") + " (layers " + worst->layers +
         ") that need " + format_bytes(worst->need) + " (weights, KV cache for " + std::to_string(shape.min_slots) +
         (shape.min_slots == 1 ? " sequence" : " sequences") + " of " + std::to_string(shape.n_ctx) +
         " positions, buffers) but the host offers " + format_bytes(worst->available) + "; " + advice;
}

}  // namespace glacier::planning
