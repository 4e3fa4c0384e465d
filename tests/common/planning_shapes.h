// Hand-made model shapes for the planning tests (memory fit, layout, layer splits): small configs whose
// weight bytes are round figures, so the expected splits and needs can be worked out by hand.
#pragma once
#include <cstdint>
#include <vector>

#include "planning/memory_fit.h"

namespace glacier::testing {

// Four layers of 10 weight bytes, an embedding and a head of 20 each; a tiny config for the KV and
// buffers (ctx 16, ubatch 4, one slot).
inline planning::MemoryShape four_layer_model() {
  model::ModelConfig cfg;
  cfg.n_layer = 4;
  cfg.n_embd = 8;
  cfg.n_head = 1;
  cfg.n_head_kv = 1;
  cfg.head_dim = 8;
  cfg.n_ff = 16;
  cfg.n_vocab = 32;
  model::WeightBytes bytes;
  bytes.per_layer = {10, 10, 10, 10};
  bytes.embedding = 20;
  bytes.head = 20;
  return planning::memory_shape(cfg, bytes, /*n_ctx=*/16, /*ubatch=*/4, /*slots_option=*/0, /*decode_groups_option=*/0);
}

inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// Eight layers of the given weight bytes, a 256 MiB embedding and head; KV and buffers of a small config
// (n_embd 64, ctx 128, ubatch 16, one slot) are a few MiB at most.
inline planning::MemoryShape eight_layer_model(const std::vector<uint64_t>& layer_bytes) {
  model::ModelConfig cfg;
  cfg.n_layer = 8;
  cfg.n_embd = 64;
  cfg.n_head = 1;
  cfg.n_head_kv = 1;
  cfg.head_dim = 64;
  cfg.n_ff = 128;
  cfg.n_vocab = 1000;
  model::WeightBytes bytes;
  bytes.per_layer = layer_bytes;
  bytes.embedding = 256 * kMiB;
  bytes.head = 256 * kMiB;
  return planning::memory_shape(cfg, bytes, /*n_ctx=*/128, /*ubatch=*/16, /*slots_option=*/0, /*decode_groups_option=*/0);
}

}  // namespace glacier::testing
