// Metadata value encoding shared by gguf::Writer and gguf::StreamWriter.
#include "gguf/gguf_encoding.h"

#include <limits>

#include "util/error.h"

namespace glacier::gguf::encoding {
namespace {

// The reader widens integers to 64 bits; a payload outside the declared width is a caller bug.
template <typename T>
T narrow(const Value& v) {
  if constexpr (std::numeric_limits<T>::is_signed) {
    const int64_t* i = std::get_if<int64_t>(&v.data);
    GLACIER_ASSERT(i && *i >= std::numeric_limits<T>::min() && *i <= std::numeric_limits<T>::max(),
                   std::string("GGUF value declared ") + value_type_name(v.type) + " holds no fitting payload");
    return static_cast<T>(*i);
  } else {
    const uint64_t* u = std::get_if<uint64_t>(&v.data);
    GLACIER_ASSERT(u && *u <= std::numeric_limits<T>::max(),
                   std::string("GGUF value declared ") + value_type_name(v.type) + " holds no fitting payload");
    return static_cast<T>(*u);
  }
}

double float_payload(const Value& v) {
  const double* d = std::get_if<double>(&v.data);
  GLACIER_ASSERT(d, std::string("GGUF value declared ") + value_type_name(v.type) + " holds no float payload");
  return *d;
}

}  // namespace

void ByteSink::put_value(const Value& v) {
  switch (v.type) {
    case ValueType::UINT8: return put(narrow<uint8_t>(v));
    case ValueType::INT8: return put(narrow<int8_t>(v));
    case ValueType::UINT16: return put(narrow<uint16_t>(v));
    case ValueType::INT16: return put(narrow<int16_t>(v));
    case ValueType::UINT32: return put(narrow<uint32_t>(v));
    case ValueType::INT32: return put(narrow<int32_t>(v));
    case ValueType::UINT64: return put(narrow<uint64_t>(v));
    case ValueType::INT64: return put(narrow<int64_t>(v));
    case ValueType::FLOAT32: return put(static_cast<float>(float_payload(v)));
    case ValueType::FLOAT64: return put(float_payload(v));
    case ValueType::BOOL: {
      const bool* b = std::get_if<bool>(&v.data);
      GLACIER_ASSERT(b, "GGUF value declared bool holds no bool payload");
      return put<uint8_t>(*b ? 1 : 0);
    }
    case ValueType::STRING: {
      const std::string* s = std::get_if<std::string>(&v.data);
      GLACIER_ASSERT(s, "GGUF value declared string holds no string payload");
      return put_string(*s);
    }
    case ValueType::ARRAY: {
      const Array* a = std::get_if<Array>(&v.data);
      GLACIER_ASSERT(a, "GGUF value declared array holds no array payload");
      put(static_cast<uint32_t>(a->elem_type));
      put<uint64_t>(a->items.size());
      for (const Value& item : a->items) {
        GLACIER_ASSERT(item.type == a->elem_type, std::string("array of ") + value_type_name(a->elem_type) +
                                                      " holds a " + value_type_name(item.type));
        put_value(item);
      }
      return;
    }
  }
  GLACIER_ASSERT(false, "unknown GGUF value type");
}

Value make_value(ValueType t, decltype(Value::data) payload) {
  Value v;
  v.type = t;
  v.data = std::move(payload);
  return v;
}

std::string shape_string(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(ne[i]);
  }
  s += ']';
  return s;
}

}  // namespace glacier::gguf::encoding
