// Lookups on an opened GGUF file: typed metadata getters that convert only when no information is
// lost, tensor lookup, and read-ahead advice for one tensor's pages.
#include "gguf/gguf_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <limits>

#include "util/error.h"

namespace glacier::gguf {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
      return "uint8";
    case ValueType::INT8:
      return "int8";
    case ValueType::UINT16:
      return "uint16";
    case ValueType::INT16:
      return "int16";
    case ValueType::UINT32:
      return "uint32";
    case ValueType::INT32:
      return "int32";
    case ValueType::FLOAT32:
      return "float32";
    case ValueType::BOOL:
      return "bool";
    case ValueType::STRING:
      return "string";
    case ValueType::ARRAY:
      return "array";
    case ValueType::UINT64:
      return "uint64";
    case ValueType::INT64:
      return "int64";
    case ValueType::FLOAT64:
      return "float64";
  }
  return "unknown";
}

namespace {

bool is_unsigned(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 || t == ValueType::UINT64;
}
bool is_signed(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}
bool is_float(ValueType t) { return t == ValueType::FLOAT32 || t == ValueType::FLOAT64; }

// "string", "array of int32": what a value is, for error messages.
std::string describe(const Value& v) {
  if (v.type != ValueType::ARRAY) return value_type_name(v.type);
  return std::string("array of ") + value_type_name(std::get<Array>(v.data).elem_type);
}

}  // namespace

const Value* File::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

// The conversions live in file-local helpers that take the File for error messages.
namespace {

[[noreturn]] void wrong_type(const File& f, const std::string& key, const char* expected,
                             const std::string& found) {
  throw InputError(f.path() + ": key '" + key + "': expected " + expected + ", found " + found);
}

const Value& require(const File& f, const std::string& key, const char* expected) {
  const Value* v = f.find(key);
  if (!v) throw InputError(f.path() + ": key '" + key + "' is missing (expected " + expected + ")");
  return *v;
}

uint64_t as_uint(const File& f, const std::string& key, const Value& v) {
  constexpr const char* kExpected = "unsigned integer";
  if (is_unsigned(v.type)) return std::get<uint64_t>(v.data);
  if (is_signed(v.type)) {
    int64_t i = std::get<int64_t>(v.data);
    if (i < 0) wrong_type(f, key, kExpected, std::string(value_type_name(v.type)) + " " + std::to_string(i));
    return static_cast<uint64_t>(i);
  }
  wrong_type(f, key, kExpected, describe(v));
}

int64_t as_int(const File& f, const std::string& key, const Value& v) {
  constexpr const char* kExpected = "integer";
  if (is_signed(v.type)) return std::get<int64_t>(v.data);
  if (is_unsigned(v.type)) {
    uint64_t u = std::get<uint64_t>(v.data);
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      wrong_type(f, key, kExpected,
                 std::string(value_type_name(v.type)) + " " + std::to_string(u) + ", too large for int64");
    }
    return static_cast<int64_t>(u);
  }
  wrong_type(f, key, kExpected, describe(v));
}

double as_float(const File& f, const std::string& key, const Value& v) {
  if (is_float(v.type)) return std::get<double>(v.data);
  if (is_unsigned(v.type)) return static_cast<double>(std::get<uint64_t>(v.data));
  if (is_signed(v.type)) return static_cast<double>(std::get<int64_t>(v.data));
  wrong_type(f, key, "float", describe(v));
}

bool as_bool(const File& f, const std::string& key, const Value& v) {
  if (v.type != ValueType::BOOL) wrong_type(f, key, "bool", describe(v));
  return std::get<bool>(v.data);
}

const std::string& as_string(const File& f, const std::string& key, const Value& v) {
  if (v.type != ValueType::STRING) wrong_type(f, key, "string", describe(v));
  return std::get<std::string>(v.data);
}

const Array& as_array(const File& f, const std::string& key, const Value& v, const char* expected) {
  if (v.type != ValueType::ARRAY) wrong_type(f, key, expected, describe(v));
  return std::get<Array>(v.data);
}

// The key's value through one of the as_* checks above, or nullopt when the file has no such key.
template <class T, class Convert>
std::optional<T> find_as(const File& f, const std::string& key, Convert as) {
  const Value* v = f.find(key);
  if (!v) return std::nullopt;
  return as(f, key, *v);
}

}  // namespace

std::string File::get_string(const std::string& key) const {
  return as_string(*this, key, require(*this, key, "string"));
}
uint64_t File::get_uint(const std::string& key) const {
  return as_uint(*this, key, require(*this, key, "unsigned integer"));
}
int64_t File::get_int(const std::string& key) const {
  return as_int(*this, key, require(*this, key, "integer"));
}
double File::get_float(const std::string& key) const {
  return as_float(*this, key, require(*this, key, "float"));
}
bool File::get_bool(const std::string& key) const { return as_bool(*this, key, require(*this, key, "bool")); }

std::optional<std::string> File::find_string(const std::string& key) const {
  return find_as<std::string>(*this, key, as_string);
}
std::optional<uint64_t> File::find_uint(const std::string& key) const {
  return find_as<uint64_t>(*this, key, as_uint);
}
std::optional<double> File::find_float(const std::string& key) const {
  return find_as<double>(*this, key, as_float);
}
std::optional<bool> File::find_bool(const std::string& key) const {
  return find_as<bool>(*this, key, as_bool);
}

std::vector<std::string> File::get_string_array(const std::string& key) const {
  constexpr const char* kExpected = "array of string";
  const Array& a = as_array(*this, key, require(*this, key, kExpected), kExpected);
  if (a.elem_type != ValueType::STRING) wrong_type(*this, key, kExpected, describe(*find(key)));
  std::vector<std::string> out;
  out.reserve(a.items.size());
  for (const Value& item : a.items) out.push_back(std::get<std::string>(item.data));
  return out;
}

std::vector<float> File::get_float_array(const std::string& key) const {
  constexpr const char* kExpected = "array of float32";
  const Array& a = as_array(*this, key, require(*this, key, kExpected), kExpected);
  if (!is_float(a.elem_type)) wrong_type(*this, key, kExpected, describe(*find(key)));
  std::vector<float> out;
  out.reserve(a.items.size());
  for (const Value& item : a.items) out.push_back(static_cast<float>(std::get<double>(item.data)));
  return out;
}

std::vector<int32_t> File::get_int_array(const std::string& key) const {
  constexpr const char* kExpected = "array of int32";
  const Array& a = as_array(*this, key, require(*this, key, kExpected), kExpected);
  if (!is_signed(a.elem_type) && !is_unsigned(a.elem_type)) {
    wrong_type(*this, key, kExpected, describe(*find(key)));
  }
  std::vector<int32_t> out;
  out.reserve(a.items.size());
  for (size_t i = 0; i < a.items.size(); ++i) {
    const Value& item = a.items[i];
    bool fits = true;
    int64_t x = 0;
    if (is_signed(item.type)) {
      x = std::get<int64_t>(item.data);
    } else {
      uint64_t u = std::get<uint64_t>(item.data);
      fits = u <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max());
      x = fits ? static_cast<int64_t>(u) : 0;
    }
    fits = fits && x >= std::numeric_limits<int32_t>::min() && x <= std::numeric_limits<int32_t>::max();
    if (!fits) {
      throw InputError(path_ + ": key '" + key + "': element " + std::to_string(i) + " (" +
                       value_type_name(item.type) + ") does not fit in int32");
    }
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

void File::prefetch(const TensorInfo& t) const {
  if (!t.data || t.n_bytes == 0) return;
  GLACIER_ASSERT(t.data >= map_ && t.data + t.n_bytes <= map_ + size_,
                 "prefetch of tensor '" + t.name + "' that is not in " + path_);
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  uint64_t start = static_cast<uint64_t>(t.data - map_) / page * page;
  uint64_t end = static_cast<uint64_t>(t.data - map_) + t.n_bytes;
  // Advice only: a failure costs speed, not correctness, so the result is ignored.
  (void)::madvise(const_cast<uint8_t*>(map_ + start), end - start, MADV_WILLNEED);
}

void File::release(const TensorInfo& t) const {
  if (!owns_map_ || !t.data || t.n_bytes == 0) return;  // never advise memory that is not our mapping
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t offset = static_cast<uint64_t>(t.data - map_);
  const uint64_t start = (offset + page - 1) / page * page;
  const uint64_t end = (offset + t.n_bytes) / page * page;
  // A read-only private file mapping never written: dropping its pages loses nothing.
  if (start < end) (void)::madvise(const_cast<uint8_t*>(map_ + start), end - start, MADV_DONTNEED);
}

void File::keep_apart(const TensorInfo& t) const {
  if (!owns_map_ || !t.data || t.n_bytes == 0) return;
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t offset = static_cast<uint64_t>(t.data - map_);
  const uint64_t start = (offset + page - 1) / page * page;
  const uint64_t end = (offset + t.n_bytes) / page * page;
  // MADV_RANDOM gives the range a mapping of its own (the kernel splits it off), which bounds what a
  // fault elsewhere maps; a failure (too many mappings) costs memory, not correctness.
  if (start < end) (void)::madvise(const_cast<uint8_t*>(map_ + start), end - start, MADV_RANDOM);
}

}  // namespace glacier::gguf
