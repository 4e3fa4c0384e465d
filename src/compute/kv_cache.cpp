// KV cache storage: one contiguous block, sized once (pages are touched as positions are written).
#include "compute/kv_cache.h"

namespace glacier::compute {

KvCache::KvCache(int32_t n_layers, int32_t n_slots, int32_t n_ctx, int32_t kv_dim)
    : n_layers_(n_layers), n_slots_(n_slots), n_ctx_(n_ctx), kv_dim_(kv_dim),
      data_(std::make_unique_for_overwrite<float[]>(bytes_needed(n_layers, n_slots, n_ctx, kv_dim) / sizeof(float))) {}

}  // namespace glacier::compute
