// Serializes metadata and tensors as a GGUF v3 file (little endian), the inverse of the reader:
// key/values in insertion order, tensor infos, then each tensor's bytes at an aligned offset.
#include "gguf/gguf_writer.h"

#include "gguf/gguf_encoding.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "util/error.h"

namespace glacier::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF writer stores little-endian fields with plain copies");

using namespace encoding;

void Writer::set(const std::string& key, Value value) {
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void Writer::set_u32(const std::string& key, uint32_t v) { set(key, make_value(ValueType::UINT32, uint64_t{v})); }
void Writer::set_i32(const std::string& key, int32_t v) { set(key, make_value(ValueType::INT32, int64_t{v})); }
void Writer::set_u64(const std::string& key, uint64_t v) { set(key, make_value(ValueType::UINT64, v)); }
void Writer::set_f32(const std::string& key, float v) { set(key, make_value(ValueType::FLOAT32, double{v})); }
void Writer::set_bool(const std::string& key, bool v) { set(key, make_value(ValueType::BOOL, v)); }
void Writer::set_string(const std::string& key, const std::string& v) {
  set(key, make_value(ValueType::STRING, v));
}
void Writer::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  set(key, make_array<std::string>(ValueType::STRING, v));
}
void Writer::set_f32_array(const std::string& key, const std::vector<float>& v) {
  set(key, make_array<double>(ValueType::FLOAT32, v));
}
void Writer::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  set(key, make_array<int64_t>(ValueType::INT32, v));
}

void Writer::add_tensor(const std::string& name, TensorType type, std::vector<int64_t> ne,
                        std::vector<uint8_t> bytes) {
  const std::string what = "tensor '" + name + "'";
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) throw InputError(what + ": added twice");
  }
  auto traits = type_traits(static_cast<uint32_t>(type));
  if (!traits)
    throw InputError(what + ": unknown tensor type id " + std::to_string(static_cast<uint32_t>(type)));
  if (ne.empty() || ne.size() > 4) {
    throw InputError(what + ": expected 1..4 dimensions, found " + std::to_string(ne.size()));
  }
  int64_t n = 1;
  for (int64_t d : ne) {
    if (d < 0) throw InputError(what + ": negative dimension in shape " + shape_string(ne));
    if (__builtin_mul_overflow(n, d, &n))
      throw InputError(what + ": element count of " + shape_string(ne) + " overflows int64");
  }
  if (ne[0] % traits->block_elems != 0) {
    throw InputError(what + ": row length " + std::to_string(ne[0]) + " is not a multiple of the " +
                     traits->name + " block size " + std::to_string(traits->block_elems));
  }
  uint64_t expected = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n / traits->block_elems),
                             static_cast<uint64_t>(traits->block_bytes), &expected)) {
    throw InputError(what + ": byte size of " + shape_string(ne) + " overflows 64 bits");
  }
  if (bytes.size() != expected) {
    throw InputError(what + ": " + traits->name + " " + shape_string(ne) + " needs " +
                     std::to_string(expected) + " bytes, found " + std::to_string(bytes.size()));
  }
  tensors_.push_back(PendingTensor{name, type, std::move(ne), std::move(bytes)});
}

std::vector<uint8_t> Writer::serialize() const {
  GLACIER_ASSERT(alignment_ != 0 && std::has_single_bit(alignment_) && alignment_ <= UINT32_MAX,
                 "GGUF writer alignment " + std::to_string(alignment_) + " is not a power of two");
  // The alignment key is added only when the reader cannot assume the default. A key the caller
  // set explicitly wins (tests use that to write files with a bad alignment).
  bool add_alignment_key = alignment_ != kDefaultAlignment;
  for (const auto& kv : kv_) add_alignment_key = add_alignment_key && kv.first != kAlignmentKey;

  ByteSink out;
  out.put_raw("GGUF", 4);
  out.put<uint32_t>(kVersion);
  out.put<uint64_t>(tensors_.size());
  out.put<uint64_t>(kv_.size() + (add_alignment_key ? 1 : 0));
  if (add_alignment_key) {
    out.put_string(kAlignmentKey);
    out.put(static_cast<uint32_t>(ValueType::UINT32));
    out.put_value(make_value(ValueType::UINT32, alignment_));
  }
  for (const auto& [key, value] : kv_) {
    out.put_string(key);
    out.put(static_cast<uint32_t>(value.type));
    out.put_value(value);
  }

  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const PendingTensor& t : tensors_) {
    offset = (offset + alignment_ - 1) / alignment_ * alignment_;
    offsets.push_back(offset);
    out.put_string(t.name);
    out.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) out.put<uint64_t>(static_cast<uint64_t>(d));
    out.put(static_cast<uint32_t>(t.type));
    out.put<uint64_t>(offset);
    offset += t.bytes.size();
  }

  out.pad_to(alignment_);
  const uint64_t data_start = out.bytes.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.bytes.resize(data_start + offsets[i], 0);
    out.put_raw(tensors_[i].bytes.data(), tensors_[i].bytes.size());
  }
  return out.bytes;
}

void Writer::write(const std::string& path) const {
  std::vector<uint8_t> bytes = serialize();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw InputError(path + ": cannot create: " + std::strerror(errno));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) throw InputError(path + ": write failed: " + std::strerror(errno));
}

}  // namespace glacier::gguf
