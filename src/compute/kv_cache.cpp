// KV cache storage: one block for keys and one for values, sized once (pages are touched as positions
// are written).
#include "compute/kv_cache.h"

#include <cstring>

#include "util/error.h"

namespace glacier::compute {

KvCache::KvCache(int32_t n_layers, int32_t n_slots, int32_t n_ctx, int32_t n_head_kv, int32_t head_dim)
    : n_layers_(n_layers), n_slots_(n_slots), n_ctx_(n_ctx), n_head_kv_(n_head_kv), head_dim_(head_dim),
      keys_(std::make_unique_for_overwrite<float[]>(static_cast<size_t>(n_layers) * n_slots * tiles(n_ctx) * tile_stride())),
      values_(std::make_unique_for_overwrite<float[]>(static_cast<size_t>(n_layers) * n_slots * tiles(n_ctx) * tile_stride())) {}

KvCache::KvCache(const model::ModelConfig& cfg, int32_t n_layers, int32_t n_slots, int32_t n_ctx)
    : KvCache(cfg.spec.mla ? 0 : n_layers, n_slots, n_ctx, cfg.spec.mla ? 1 : cfg.n_head_kv,
              cfg.spec.mla ? cfg.kv_cache_row_floats() : cfg.head_dim) {
  if (!cfg.spec.mla) return;
  // Only the rows: one per position, as wide as the latent plus the rope key.
  n_layers_ = n_layers;
  rows_only_ = true;
  values_ = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(n_layers) * n_slots * n_ctx * kv_dim());
}

void KvCache::store_in_tile(float* tiles, int32_t layer, int32_t slot, int32_t pos, const float* x) {
  GLACIER_ASSERT(!rows_only_, "a latent-row cache keeps no tiles");
  float* tile = tiles + tile_base(layer, slot) + static_cast<size_t>(pos / kernels::kKeyTile) * tile_stride();
  const int32_t lane = pos % kernels::kKeyTile;
  for (int32_t i = 0; i < kv_dim(); ++i) tile[static_cast<size_t>(i) * kernels::kKeyTile + lane] = x[i];
}

void KvCache::copy_tile_prefix(float* tiles, int32_t layer, int32_t src, int32_t dst, int32_t n_pos) {
  const int32_t full_tiles = n_pos / kernels::kKeyTile, partial = n_pos % kernels::kKeyTile;
  const float* from = tiles + tile_base(layer, src);
  float* to = tiles + tile_base(layer, dst);
  std::memcpy(to, from, static_cast<size_t>(full_tiles) * tile_stride() * sizeof(float));
  // The last tile lane by lane: its lanes past n_pos belong to dst.
  const size_t last = static_cast<size_t>(full_tiles) * tile_stride();
  for (int32_t i = 0; i < kv_dim() && partial > 0; ++i)
    std::memcpy(to + last + static_cast<size_t>(i) * kernels::kKeyTile, from + last + static_cast<size_t>(i) * kernels::kKeyTile,
                static_cast<size_t>(partial) * sizeof(float));
}

void KvCache::copy_prefix(int32_t src, int32_t dst, int32_t n_pos) {
  GLACIER_ASSERT(src >= 0 && src < n_slots_ && dst >= 0 && dst < n_slots_ && src != dst, "copy between two slots in range");
  GLACIER_ASSERT(n_pos >= 0 && n_pos <= n_ctx_, "copied positions within the context");
  for (int32_t layer = 0; layer < n_layers_; ++layer) {
    if (rows_only_) {  // a latent-row cache (MLA): rows, no tiles
      std::memcpy(latent_row(layer, dst, 0), latent_row(layer, src, 0), static_cast<size_t>(n_pos) * kv_dim() * sizeof(float));
      continue;
    }
    copy_tile_prefix(keys_.get(), layer, src, dst, n_pos);
    copy_tile_prefix(values_.get(), layer, src, dst, n_pos);
  }
}

}  // namespace glacier::compute
