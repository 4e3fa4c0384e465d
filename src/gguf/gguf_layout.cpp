// The metadata, tensor-info table and header encoding shared by gguf::Writer and gguf::StreamWriter.
#include "gguf/gguf_layout.h"

#include <bit>

#include "gguf/gguf_encoding.h"
#include "util/error.h"

namespace glacier::gguf {

using namespace encoding;

void MetadataBuilder::set(const std::string& key, Value value) {
  GLACIER_ASSERT(!frozen_, "GGUF metadata key '" + key + "' set after the header was written");
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void MetadataBuilder::set_u32(const std::string& key, uint32_t v) { set(key, make_value(ValueType::UINT32, uint64_t{v})); }
void MetadataBuilder::set_i32(const std::string& key, int32_t v) { set(key, make_value(ValueType::INT32, int64_t{v})); }
void MetadataBuilder::set_u64(const std::string& key, uint64_t v) { set(key, make_value(ValueType::UINT64, v)); }
void MetadataBuilder::set_f32(const std::string& key, float v) { set(key, make_value(ValueType::FLOAT32, double{v})); }
void MetadataBuilder::set_bool(const std::string& key, bool v) { set(key, make_value(ValueType::BOOL, v)); }
void MetadataBuilder::set_string(const std::string& key, const std::string& v) {
  set(key, make_value(ValueType::STRING, v));
}
void MetadataBuilder::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  set(key, make_array<std::string>(ValueType::STRING, v));
}
void MetadataBuilder::set_f32_array(const std::string& key, const std::vector<float>& v) {
  set(key, make_array<double>(ValueType::FLOAT32, v));
}
void MetadataBuilder::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  set(key, make_array<int64_t>(ValueType::INT32, v));
}

TensorTable::TensorTable(uint64_t alignment) : alignment_(alignment) {
  GLACIER_ASSERT(alignment_ != 0 && std::has_single_bit(alignment_) && alignment_ <= UINT32_MAX,
                 "GGUF alignment " + std::to_string(alignment_) + " is not a power of two");
}

uint64_t TensorTable::byte_size(const std::string& name, TensorType type, const std::vector<int64_t>& ne) {
  const std::string what = "tensor '" + name + "'";
  const auto traits = type_traits(static_cast<uint32_t>(type));
  if (!traits) throw InputError(what + ": unknown tensor type id " + std::to_string(static_cast<uint32_t>(type)));
  if (ne.empty() || ne.size() > 4)
    throw InputError(what + ": expected 1..4 dimensions, found " + std::to_string(ne.size()));
  int64_t n = 1;
  for (int64_t d : ne) {
    if (d < 0) throw InputError(what + ": negative dimension in shape " + shape_string(ne));
    if (__builtin_mul_overflow(n, d, &n))
      throw InputError(what + ": element count of " + shape_string(ne) + " overflows int64");
  }
  if (ne[0] % traits->block_elems != 0)
    throw InputError(what + ": row length " + std::to_string(ne[0]) + " is not a multiple of the " + traits->name +
                     " block size " + std::to_string(traits->block_elems));
  uint64_t n_bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n / traits->block_elems),
                             static_cast<uint64_t>(traits->block_bytes), &n_bytes))
    throw InputError(what + ": byte size of " + shape_string(ne) + " overflows 64 bits");
  return n_bytes;
}

const TensorSlot& TensorTable::add(const std::string& name, TensorType type, const std::vector<int64_t>& ne) {
  for (const TensorSlot& t : slots_)
    if (t.name == name) throw InputError("tensor '" + name + "': declared twice");
  const uint64_t n_bytes = byte_size(name, type, ne);
  const uint64_t offset = round_up(data_size_, alignment_);
  slots_.push_back(TensorSlot{name, type, ne, n_bytes, offset});
  data_size_ = offset + n_bytes;
  return slots_.back();
}

std::vector<uint8_t> encode_header(const MetadataBuilder& metadata, const TensorTable& tensors) {
  const auto& kv = metadata.entries();
  const uint64_t alignment = tensors.alignment();
  // The alignment key only when the reader cannot assume the default; a key the caller set
  // explicitly wins (tests write files with a bad alignment that way).
  bool add_alignment_key = alignment != kDefaultAlignment;
  for (const auto& entry : kv) add_alignment_key = add_alignment_key && entry.first != kAlignmentKey;

  ByteSink h;
  h.put_bytes("GGUF", 4);
  h.put<uint32_t>(kVersion);
  h.put<uint64_t>(tensors.slots().size());
  h.put<uint64_t>(kv.size() + (add_alignment_key ? 1 : 0));
  if (add_alignment_key) {
    h.put_string(kAlignmentKey);
    h.put(static_cast<uint32_t>(ValueType::UINT32));
    h.put(static_cast<uint32_t>(alignment));
  }
  for (const auto& [key, value] : kv) {
    h.put_string(key);
    h.put(static_cast<uint32_t>(value.type));
    h.put_value(value);
  }
  for (const TensorSlot& t : tensors.slots()) {
    h.put_string(t.name);
    h.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) h.put<uint64_t>(static_cast<uint64_t>(d));
    h.put(static_cast<uint32_t>(t.type));
    h.put<uint64_t>(t.offset);
  }
  h.pad_to(alignment);
  return h.take();
}

}  // namespace glacier::gguf
