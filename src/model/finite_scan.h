// Load-time scan of weight tensors for NaN and Inf: every value of f32/f16/bf16 tensors, the block
// scales of quantized ones. A model with non-finite weights is refused before any prompt runs.
#pragma once
#include <cstdint>
#include <vector>

#include "gguf/gguf_fwd.h"

namespace glacier {
class ThreadPool;
}

namespace glacier::model {

struct NonFiniteCount {
  // Plain types: non-finite values. Quantized types: blocks with a non-finite scale (a block's values
  // are its scales times small integers, so the scales alone decide whether they are finite).
  uint64_t count = 0;
  int64_t first_element = -1;  // index of the first bad value (quantized: the first element of its block)
};

// Scans one tensor, split over the pool's threads (nullptr: on the calling thread). Types without a
// layout known here are not scanned (count 0): the loader refuses them anyway.
NonFiniteCount count_non_finite(const gguf::TensorInfo& t, ThreadPool* pool = nullptr);

// Throws InputError "<file>: tensor '<name>': expected finite weights, found N non-finite values
// (first at element i: nan)" when the tensor holds any.
void check_tensor_finite(const gguf::File& file, const gguf::TensorInfo& t, ThreadPool* pool = nullptr);

// check_tensor_finite on each tensor in order (a tensor listed twice is scanned once).
void check_weights_finite(const gguf::File& file, const std::vector<const gguf::TensorInfo*>& tensors,
                          ThreadPool* pool = nullptr);

}  // namespace glacier::model
