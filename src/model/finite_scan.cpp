// Non-finite scan of weight tensors: a value is NaN or Inf exactly when its exponent bits are all ones,
// so the scan tests bit patterns (no conversion) in loops the compiler vectorizes.
#include "model/finite_scan.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <set>
#include <string>

#include "gguf/gguf_file.h"
#include "kernels/quant_blocks.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace glacier::model {
namespace {

constexpr uint32_t kF32ExponentMask = 0x7f800000u;
constexpr uint16_t kF16ExponentMask = 0x7c00u;
constexpr uint16_t kBF16ExponentMask = 0x7f80u;
// Values counted in one vectorizable pass before looking for the first bad index: large enough that
// the pass dominates, small enough that the rescan of a chunk holding a bad value costs nothing.
constexpr int64_t kCountChunk = 4096;

template <typename Word>
bool exponent_all_ones(Word w, Word mask) {
  return (w & mask) == mask;
}

template <typename Word>
Word word_at(const uint8_t* p) {
  Word w;
  std::memcpy(&w, p, sizeof(Word));
  return w;
}

// Non-finite values among elements [begin, end) of a plain f32/f16/bf16 array.
template <typename Word>
NonFiniteCount scan_plain(const uint8_t* data, Word mask, int64_t begin, int64_t end) {
  NonFiniteCount r;
  for (int64_t chunk = begin; chunk < end; chunk += kCountChunk) {
    const int64_t stop = std::min(end, chunk + kCountChunk);
    uint64_t bad = 0;
    for (int64_t i = chunk; i < stop; ++i) bad += exponent_all_ones(word_at<Word>(data + i * sizeof(Word)), mask);
    if (bad > 0 && r.first_element < 0) {
      for (int64_t i = chunk; i < stop && r.first_element < 0; ++i)
        if (exponent_all_ones(word_at<Word>(data + i * sizeof(Word)), mask)) r.first_element = i;
    }
    r.count += bad;
  }
  return r;
}

// Where a quantized block keeps its fp16 scales (one or two), from the block layouts.
struct BlockLayout {
  size_t block_bytes = 0;
  int64_t block_elems = 0;
  size_t scale_offsets[2] = {0, 0};
  int n_scales = 0;
};

// A block whose only scale is its fp16 d.
template <class Block>
BlockLayout one_scale(int64_t block_elems) {
  return {sizeof(Block), block_elems, {offsetof(Block, d), 0}, 1};
}

// A block with an fp16 d and an fp16 minimum at min_offset.
template <class Block>
BlockLayout scale_and_min(int64_t block_elems, size_t min_offset) {
  return {sizeof(Block), block_elems, {offsetof(Block, d), min_offset}, 2};
}

bool block_layout(gguf::TensorType type, BlockLayout& out) {
  using gguf::TensorType;
  switch (type) {
    case TensorType::Q8_0: out = one_scale<kernels::BlockQ8_0>(kernels::kQK8_0); return true;
    case TensorType::Q4_0: out = one_scale<kernels::BlockQ4_0>(kernels::kQK4_0); return true;
    case TensorType::Q4_1: out = scale_and_min<kernels::BlockQ4_1>(kernels::kQK8_0, offsetof(kernels::BlockQ4_1, m)); return true;
    case TensorType::Q5_0: out = one_scale<kernels::BlockQ5_0>(kernels::kQK8_0); return true;
    case TensorType::Q5_1: out = scale_and_min<kernels::BlockQ5_1>(kernels::kQK8_0, offsetof(kernels::BlockQ5_1, m)); return true;
    case TensorType::IQ4_NL: out = one_scale<kernels::BlockIQ4_NL>(kernels::kQK8_0); return true;
    case TensorType::IQ4_XS: out = one_scale<kernels::BlockIQ4_XS>(kernels::kQK_K); return true;
    case TensorType::Q2_K: out = scale_and_min<kernels::BlockQ2_K>(kernels::kQK_K, offsetof(kernels::BlockQ2_K, dmin)); return true;
    case TensorType::Q3_K: out = one_scale<kernels::BlockQ3_K>(kernels::kQK_K); return true;
    case TensorType::Q4_K: out = scale_and_min<kernels::BlockQ4_K>(kernels::kQK_K, offsetof(kernels::BlockQ4_K, dmin)); return true;
    case TensorType::Q5_K: out = scale_and_min<kernels::BlockQ5_K>(kernels::kQK_K, offsetof(kernels::BlockQ5_K, dmin)); return true;
    case TensorType::Q6_K: out = one_scale<kernels::BlockQ6_K>(kernels::kQK_K); return true;
    default:
      return false;
  }
}

// Blocks [begin, end) whose scales are not all finite.
NonFiniteCount scan_blocks(const uint8_t* data, const BlockLayout& b, int64_t begin, int64_t end) {
  NonFiniteCount r;
  for (int64_t i = begin; i < end; ++i) {
    const uint8_t* block = data + static_cast<size_t>(i) * b.block_bytes;
    bool bad = false;
    for (int s = 0; s < b.n_scales; ++s)
      bad |= exponent_all_ones(word_at<uint16_t>(block + b.scale_offsets[s]), kF16ExponentMask);
    if (bad && r.first_element < 0) r.first_element = i * b.block_elems;
    r.count += bad;
  }
  return r;
}

// Runs scan(begin, end) over [0, n) on the pool's threads and merges the parts.
template <typename Scan>
NonFiniteCount split_scan(int64_t n, ThreadPool* pool, const Scan& scan) {
  if (!pool) return scan(0, n);
  std::vector<NonFiniteCount> parts(static_cast<size_t>(pool->size()));
  pool->parallel_for(n, [&](int64_t begin, int64_t end, int thread) { parts[static_cast<size_t>(thread)] = scan(begin, end); });
  NonFiniteCount r;
  for (const NonFiniteCount& p : parts) {
    r.count += p.count;
    if (p.first_element >= 0 && (r.first_element < 0 || p.first_element < r.first_element))
      r.first_element = p.first_element;
  }
  return r;
}

// "nan", "inf" or "-inf": the first bad value of a plain tensor, for the message.
std::string plain_value_text(const gguf::TensorInfo& t, int64_t i) {
  float x = 0.0f;
  if (t.type == gguf::TensorType::F32) x = word_at<float>(t.data + 4 * i);
  if (t.type == gguf::TensorType::F16) x = kernels::fp16_to_f32(word_at<uint16_t>(t.data + 2 * i));
  if (t.type == gguf::TensorType::BF16) x = kernels::bf16_to_f32(word_at<uint16_t>(t.data + 2 * i));
  return x != x ? "nan" : (x > 0 ? "inf" : "-inf");
}

}  // namespace

NonFiniteCount count_non_finite(const gguf::TensorInfo& t, ThreadPool* pool) {
  if (!t.data) return {};
  const int64_t n = t.n_elements();
  switch (t.type) {
    case gguf::TensorType::F32:
      return split_scan(n, pool, [&](int64_t b, int64_t e) { return scan_plain<uint32_t>(t.data, kF32ExponentMask, b, e); });
    case gguf::TensorType::F16:
      return split_scan(n, pool, [&](int64_t b, int64_t e) { return scan_plain<uint16_t>(t.data, kF16ExponentMask, b, e); });
    case gguf::TensorType::BF16:
      return split_scan(n, pool, [&](int64_t b, int64_t e) { return scan_plain<uint16_t>(t.data, kBF16ExponentMask, b, e); });
    default:
      break;
  }
  BlockLayout layout;
  if (!block_layout(t.type, layout)) return {};
  return split_scan(n / layout.block_elems, pool, [&](int64_t b, int64_t e) { return scan_blocks(t.data, layout, b, e); });
}

void check_tensor_finite(const gguf::File& file, const gguf::TensorInfo& t, ThreadPool* pool) {
  const NonFiniteCount c = count_non_finite(t, pool);
  if (c.count == 0) return;
  BlockLayout layout;
  const bool quantized = block_layout(t.type, layout);
  const std::string found =
      quantized ? std::to_string(c.count) + " " + gguf::type_name(t.type) +
                      " blocks with a non-finite scale (first at element " + std::to_string(c.first_element) + ")"
                : std::to_string(c.count) + " non-finite values (first at element " + std::to_string(c.first_element) +
                      ": " + plain_value_text(t, c.first_element) + ")";
  throw InputError(file.path() + ": tensor '" + t.name + "': expected finite weights, found " + found);
}

void check_weights_finite(const gguf::File& file, const std::vector<const gguf::TensorInfo*>& tensors,
                          ThreadPool* pool) {
  std::set<const gguf::TensorInfo*> scanned;
  for (const gguf::TensorInfo* t : tensors)
    if (scanned.insert(t).second) check_tensor_finite(file, *t, pool);
}

}  // namespace glacier::model
