// The byte encoding both GGUF writers share: fixed header constants, metadata values (integers
// narrowed back to their declared width, strings, nested arrays) and the Value builders.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/byte_codec.h"

namespace glacier::gguf::encoding {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr const char* kAlignmentKey = "general.alignment";

inline uint64_t round_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// The byte writer with GGUF's metadata values added.
class ByteSink : public util::ByteWriter {
 public:
  // A value as GGUF stores it; a payload that does not fit its declared type is a caller bug (assert).
  void put_value(const Value& v);
};

Value make_value(ValueType t, decltype(Value::data) payload);

// An array of `elem` values, each item converted to the widened payload type first.
template <typename Payload, typename T>
Value make_array(ValueType elem, const std::vector<T>& items) {
  Array a;
  a.elem_type = elem;
  a.items.reserve(items.size());
  for (const T& x : items) a.items.push_back(make_value(elem, Payload(x)));
  return make_value(ValueType::ARRAY, std::move(a));
}

// "[64, 512]" for messages.
std::string shape_string(const std::vector<int64_t>& ne);

}  // namespace glacier::gguf::encoding
