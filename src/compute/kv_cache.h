// The KV cache of one rank's layers: for every slot, keys and values of every position, allocated
// once at start-up (no allocation while decoding). Slots are indexed by the driver's slot ids.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace glacier::compute {

class KvCache {
 public:
  KvCache(int32_t n_layers, int32_t n_slots, int32_t n_ctx, int32_t kv_dim);

  float* key(int32_t layer, int32_t slot, int32_t pos) { return at(0, layer, slot, pos); }
  float* value(int32_t layer, int32_t slot, int32_t pos) { return at(1, layer, slot, pos); }
  int32_t n_slots() const { return n_slots_; }
  int32_t n_ctx() const { return n_ctx_; }
  static uint64_t bytes_needed(int32_t n_layers, int32_t n_slots, int32_t n_ctx, int32_t kv_dim) {
    return 2ull * static_cast<uint64_t>(n_layers) * static_cast<uint64_t>(n_slots) * static_cast<uint64_t>(n_ctx) *
           static_cast<uint64_t>(kv_dim) * sizeof(float);
  }

 private:
  float* at(int kv, int32_t layer, int32_t slot, int32_t pos) {
    size_t idx = ((static_cast<size_t>(kv) * n_layers_ + layer) * n_slots_ + slot) * n_ctx_ + pos;
    return data_.get() + idx * kv_dim_;
  }
  int32_t n_layers_, n_slots_, n_ctx_, kv_dim_;
  // Not zeroed: attention reads only positions already written, and untouched pages cost no memory.
  std::unique_ptr<float[]> data_;
};

}  // namespace glacier::compute
