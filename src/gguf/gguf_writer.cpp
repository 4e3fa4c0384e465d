// Serializes metadata and tensors as a GGUF v3 file (little endian), the inverse of the reader:
// key/values in insertion order, tensor infos, then each tensor's bytes at an aligned offset.
#include "gguf/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "util/error.h"

namespace glacier::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF writer stores little-endian fields with plain copies");

namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr const char* kAlignmentKey = "general.alignment";

class ByteSink {
 public:
  std::vector<uint8_t> bytes;

  template <typename T>
  void put(T v) {
    put_raw(&v, sizeof(T));
  }
  void put_raw(const void* p, size_t n) {
    size_t at = bytes.size();
    bytes.resize(at + n);
    if (n) std::memcpy(bytes.data() + at, p, n);
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    put_raw(s.data(), s.size());
  }
  void pad_to(uint64_t alignment) { bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, 0); }
};

// Narrows the widened payload back to the declared width; a value that does not fit is a bug in
// the caller that built the Value.
template <typename T>
T narrow_unsigned(const Value& v) {
  const uint64_t* u = std::get_if<uint64_t>(&v.data);
  GLACIER_ASSERT(
      u, std::string("GGUF value declared ") + value_type_name(v.type) + " holds no unsigned payload");
  GLACIER_ASSERT(*u <= std::numeric_limits<T>::max(),
                 std::to_string(*u) + " does not fit in " + value_type_name(v.type));
  return static_cast<T>(*u);
}

template <typename T>
T narrow_signed(const Value& v) {
  const int64_t* i = std::get_if<int64_t>(&v.data);
  GLACIER_ASSERT(i,
                 std::string("GGUF value declared ") + value_type_name(v.type) + " holds no signed payload");
  GLACIER_ASSERT(*i >= std::numeric_limits<T>::min() && *i <= std::numeric_limits<T>::max(),
                 std::to_string(*i) + " does not fit in " + value_type_name(v.type));
  return static_cast<T>(*i);
}

double float_payload(const Value& v) {
  const double* d = std::get_if<double>(&v.data);
  GLACIER_ASSERT(d,
                 std::string("GGUF value declared ") + value_type_name(v.type) + " holds no float payload");
  return *d;
}

void put_value(ByteSink& out, const Value& v) {
  switch (v.type) {
    case ValueType::UINT8:
      out.put(narrow_unsigned<uint8_t>(v));
      break;
    case ValueType::UINT16:
      out.put(narrow_unsigned<uint16_t>(v));
      break;
    case ValueType::UINT32:
      out.put(narrow_unsigned<uint32_t>(v));
      break;
    case ValueType::UINT64:
      out.put(narrow_unsigned<uint64_t>(v));
      break;
    case ValueType::INT8:
      out.put(narrow_signed<int8_t>(v));
      break;
    case ValueType::INT16:
      out.put(narrow_signed<int16_t>(v));
      break;
    case ValueType::INT32:
      out.put(narrow_signed<int32_t>(v));
      break;
    case ValueType::INT64:
      out.put(narrow_signed<int64_t>(v));
      break;
    case ValueType::FLOAT32:
      out.put(static_cast<float>(float_payload(v)));
      break;
    case ValueType::FLOAT64:
      out.put(float_payload(v));
      break;
    case ValueType::BOOL: {
      const bool* b = std::get_if<bool>(&v.data);
      GLACIER_ASSERT(b, "GGUF value declared bool holds no bool payload");
      out.put<uint8_t>(*b ? 1 : 0);
      break;
    }
    case ValueType::STRING: {
      const std::string* s = std::get_if<std::string>(&v.data);
      GLACIER_ASSERT(s, "GGUF value declared string holds no string payload");
      out.put_string(*s);
      break;
    }
    case ValueType::ARRAY: {
      const Array* a = std::get_if<Array>(&v.data);
      GLACIER_ASSERT(a, "GGUF value declared array holds no array payload");
      out.put(static_cast<uint32_t>(a->elem_type));
      out.put<uint64_t>(a->items.size());
      for (const Value& item : a->items) {
        GLACIER_ASSERT(item.type == a->elem_type, std::string("array of ") + value_type_name(a->elem_type) +
                                                      " holds a " + value_type_name(item.type));
        put_value(out, item);
      }
      break;
    }
  }
}

Value scalar(ValueType t, decltype(Value::data) payload) {
  Value v;
  v.type = t;
  v.data = std::move(payload);
  return v;
}

template <typename T, typename Payload>
Value array_of(ValueType elem, const std::vector<T>& items) {
  Array a;
  a.elem_type = elem;
  a.items.reserve(items.size());
  for (const T& x : items) a.items.push_back(scalar(elem, Payload(x)));
  return scalar(ValueType::ARRAY, std::move(a));
}

std::string shape_string(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace

void Writer::set(const std::string& key, Value value) {
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void Writer::set_u32(const std::string& key, uint32_t v) { set(key, scalar(ValueType::UINT32, uint64_t{v})); }
void Writer::set_i32(const std::string& key, int32_t v) { set(key, scalar(ValueType::INT32, int64_t{v})); }
void Writer::set_u64(const std::string& key, uint64_t v) { set(key, scalar(ValueType::UINT64, v)); }
void Writer::set_f32(const std::string& key, float v) { set(key, scalar(ValueType::FLOAT32, double{v})); }
void Writer::set_bool(const std::string& key, bool v) { set(key, scalar(ValueType::BOOL, v)); }
void Writer::set_string(const std::string& key, const std::string& v) {
  set(key, scalar(ValueType::STRING, v));
}
void Writer::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  set(key, array_of<std::string, std::string>(ValueType::STRING, v));
}
void Writer::set_f32_array(const std::string& key, const std::vector<float>& v) {
  set(key, array_of<float, double>(ValueType::FLOAT32, v));
}
void Writer::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  set(key, array_of<int32_t, int64_t>(ValueType::INT32, v));
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
    put_value(out, scalar(ValueType::UINT32, alignment_));
  }
  for (const auto& [key, value] : kv_) {
    out.put_string(key);
    out.put(static_cast<uint32_t>(value.type));
    put_value(out, value);
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
