// Hand-made model shapes for the planning tests (memory fit, layout, layer splits, decode groups): small
// configs whose weight bytes and step times are round figures, so the expected splits, needs and choices
// can be worked out by hand.
#pragma once
#include <cstdint>
#include <vector>

#include "planning/decode_group_choice.h"
#include "planning/memory_fit.h"

namespace glacier::testing {

// A model of one attention head as wide as the embedding, a layer per entry of layer_bytes and an
// embedding and a head of embedding_bytes each, as the memory check sees it with one slot.
inline planning::MemoryShape one_head_model(int32_t n_embd, int32_t n_ff, int32_t n_vocab,
                                            const std::vector<uint64_t>& layer_bytes, uint64_t embedding_bytes,
                                            int32_t n_ctx, int32_t ubatch) {
  model::ModelConfig cfg;
  cfg.n_layer = static_cast<int32_t>(layer_bytes.size());
  cfg.n_embd = cfg.head_dim = n_embd;
  cfg.n_head = cfg.n_head_kv = 1;
  cfg.n_ff = n_ff;
  cfg.n_vocab = n_vocab;
  model::WeightBytes bytes;
  bytes.per_layer = layer_bytes;
  bytes.embedding = bytes.head = embedding_bytes;
  return planning::memory_shape(cfg, bytes, n_ctx, ubatch, /*slots_option=*/0, /*decode_groups_option=*/0);
}

// Four layers of 10 weight bytes, an embedding and a head of 20 each; a tiny config for the KV and
// buffers (ctx 16, ubatch 4, one slot).
inline planning::MemoryShape four_layer_model() {
  return one_head_model(/*n_embd=*/8, /*n_ff=*/16, /*n_vocab=*/32, {10, 10, 10, 10}, /*embedding_bytes=*/20,
                        /*n_ctx=*/16, /*ubatch=*/4);
}

inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// Eight layers of the given weight bytes, a 256 MiB embedding and head; KV and buffers of a small config
// (n_embd 64, ctx 128, ubatch 16, one slot) are a few MiB at most.
inline planning::MemoryShape eight_layer_model(const std::vector<uint64_t>& layer_bytes) {
  return one_head_model(/*n_embd=*/64, /*n_ff=*/128, /*n_vocab=*/1000, layer_bytes, /*embedding_bytes=*/256 * kMiB,
                        /*n_ctx=*/128, /*ubatch=*/16);
}

// Two stages whose step takes b units for b rows, a hop of 4 units, 16 slots, up to 8 groups. A round
// at G groups of b = ceil(live / G) rows is max(2b + 2 x 4, formed x b):
//   live 16: G=2 24, G=3 20, G=4..8 16          -> 4 groups (the start-up choice)
//   live 8:  G=2 16, G=3 14, G=4..7 12, G=8 10  -> 8
//   live 4:  G=2 12, G=3 12, G=4 10             -> 4 (at most live groups)
//   live 2:  one row a group at the fewest, 2   -> 2
inline planning::DecodeGroupInputs hop_bound_pair() {
  planning::DecodeGroupInputs in;
  in.n_stages = 2;
  in.slots = 16;
  in.max_groups = 8;
  in.hop_seconds = 4.0;
  in.stages.assign(2, planning::StageStepCosts{{1, 2}, {1.0, 2.0}});
  return in;
}

}  // namespace glacier::testing
