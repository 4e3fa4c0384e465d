// The KV cache of one rank's layers: for every slot, keys and values of every position, allocated
// once at start-up (no allocation while decoding). Slots are indexed by the driver's slot ids. Keys and
// values are kept in tiles of 16 positions, transposed inside a tile (kernels/attention.h). Under latent
// attention (deepseek2) a position keeps one row only, the normalised latent and the rope key
// (kv_lora_rank + n_rot floats, latent_row()): no per-head keys and values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/attention.h"
#include "model/model_config.h"

namespace glacier::compute {

class KvCache {
 public:
  KvCache(int32_t n_layers, int32_t n_slots, int32_t n_ctx, int32_t n_head_kv, int32_t head_dim);
  // The cache `cfg` needs: per-head keys and values, or the latent rows of latent attention.
  KvCache(const model::ModelConfig& cfg, int32_t n_layers, int32_t n_slots, int32_t n_ctx);

  // Write the keys or values of every KV head at `pos` (kv_dim floats, head after head) into their tile.
  void store_key(int32_t layer, int32_t slot, int32_t pos, const float* k) { store_in_tile(keys_.get(), layer, slot, pos, k); }
  void store_value(int32_t layer, int32_t slot, int32_t pos, const float* v) { store_in_tile(values_.get(), layer, slot, pos, v); }
  // The slot's key or value tiles: tile j (positions 16j..16j+15) starts tile_stride() floats after tile j - 1.
  const float* key_tiles(int32_t layer, int32_t slot) const { return keys_.get() + tile_base(layer, slot); }
  const float* value_tiles(int32_t layer, int32_t slot) const { return values_.get() + tile_base(layer, slot); }
  size_t tile_stride() const { return kernels::tile_floats(n_head_kv_, head_dim_); }
  // Latent attention's row of `pos` (a latent-row cache only).
  float* latent_row(int32_t layer, int32_t slot, int32_t pos) {
    return values_.get() + ((static_cast<size_t>(layer) * n_slots_ + slot) * n_ctx_ + pos) * kv_dim();
  }
  // Copies positions [0, n_pos) of every layer from slot src to slot dst (dst's later positions untouched).
  void copy_prefix(int32_t src, int32_t dst, int32_t n_pos);
  int32_t n_slots() const { return n_slots_; }
  int32_t n_ctx() const { return n_ctx_; }
  static uint64_t bytes_needed(int32_t n_layers, int32_t n_slots, int32_t n_ctx, int32_t kv_dim) {
    const uint64_t per_slot_layer = 2 * static_cast<uint64_t>(tiles(n_ctx)) * kernels::kKeyTile * static_cast<uint64_t>(kv_dim) * sizeof(float);
    return static_cast<uint64_t>(n_layers) * static_cast<uint64_t>(n_slots) * per_slot_layer;
  }
  // What the cache of `cfg` takes (the memory check and the pipeline's memory model count it this way).
  static uint64_t bytes_needed(const model::ModelConfig& cfg, int32_t n_layers, int32_t n_slots, int32_t n_ctx) {
    if (!cfg.spec.mla) return bytes_needed(n_layers, n_slots, n_ctx, cfg.kv_dim());
    return static_cast<uint64_t>(n_layers) * static_cast<uint64_t>(n_slots) * static_cast<uint64_t>(n_ctx) *
           static_cast<uint64_t>(cfg.kv_cache_row_floats()) * sizeof(float);
  }

 private:
  static int32_t tiles(int32_t n_ctx) { return (n_ctx + kernels::kKeyTile - 1) / kernels::kKeyTile; }
  int32_t kv_dim() const { return n_head_kv_ * head_dim_; }
  size_t tile_base(int32_t layer, int32_t slot) const {
    return (static_cast<size_t>(layer) * n_slots_ + slot) * static_cast<size_t>(tiles(n_ctx_)) * tile_stride();
  }
  void store_in_tile(float* tiles, int32_t layer, int32_t slot, int32_t pos, const float* x);
  // Copies the lanes of positions [0, n_pos) of one layer's tiles from slot src to slot dst.
  void copy_tile_prefix(float* tiles, int32_t layer, int32_t src, int32_t dst, int32_t n_pos);
  int32_t n_layers_, n_slots_, n_ctx_, n_head_kv_, head_dim_;
  bool rows_only_ = false;  // latent rows: no tiles
  // Not zeroed: attention uses only positions already written (other lanes of a tile are masked), and
  // untouched pages cost no memory.
  std::unique_ptr<float[]> keys_, values_;
};

}  // namespace glacier::compute
