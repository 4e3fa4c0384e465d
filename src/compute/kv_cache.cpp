// KV cache storage: one contiguous block, sized and zeroed once.
#include "compute/kv_cache.h"

namespace glacier::compute {

KvCache::KvCache(int32_t n_layers, int32_t n_slots, int32_t n_ctx, int32_t kv_dim)
    : n_layers_(n_layers), n_slots_(n_slots), n_ctx_(n_ctx), kv_dim_(kv_dim),
      data_(bytes_needed(n_layers, n_slots, n_ctx, kv_dim) / sizeof(float), 0.0f) {}

}  // namespace glacier::compute
