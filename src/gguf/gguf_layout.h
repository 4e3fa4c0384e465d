// What both GGUF writers (in memory and streaming) lay out the same way: the metadata in insertion
// order, the tensor infos with their aligned offsets, and the header bytes that come before the data.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"

namespace glacier::gguf {

// Metadata keys and values in insertion order; set() replaces an existing key and keeps its place.
class MetadataBuilder {
 public:
  void set(const std::string& key, Value value);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);

  const std::vector<std::pair<std::string, Value>>& entries() const { return kv_; }

 protected:
  // After freeze() a set() is a caller bug: the streaming writer has already written the header.
  void freeze() { frozen_ = true; }

 private:
  std::vector<std::pair<std::string, Value>> kv_;
  bool frozen_ = false;
};

// One tensor's entry in the tensor-info table.
struct TensorSlot {
  std::string name;
  TensorType type;
  std::vector<int64_t> ne;
  uint64_t n_bytes;
  uint64_t offset;  // within the data section, a multiple of the alignment
};

// The tensor-info table: each tensor checked (unique name, known type, 1..4 non-negative dimensions,
// rows of whole blocks, no overflow) and placed at the next aligned offset. Throws InputError naming
// the tensor.
class TensorTable {
 public:
  explicit TensorTable(uint64_t alignment);  // a power of two (asserted)

  const TensorSlot& add(const std::string& name, TensorType type, const std::vector<int64_t>& ne);
  // The encoded size of a tensor of that shape and type, with add()'s checks but the name's uniqueness.
  static uint64_t byte_size(const std::string& name, TensorType type, const std::vector<int64_t>& ne);
  const std::vector<TensorSlot>& slots() const { return slots_; }
  uint64_t alignment() const { return alignment_; }

 private:
  uint64_t alignment_;
  std::vector<TensorSlot> slots_;
  uint64_t data_size_ = 0;  // end of the last slot
};

// Everything before the data section: magic, version, counts, metadata (plus general.alignment when
// the alignment is not the default and the caller did not set that key), tensor infos, and the
// padding up to the aligned start of the data.
std::vector<uint8_t> encode_header(const MetadataBuilder& metadata, const TensorTable& tensors);

}  // namespace glacier::gguf
