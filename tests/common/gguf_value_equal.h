// Test helper: whether two GGUF metadata values are the same (a file written and read back, a key copied
// from another file). Header-only and free of GoogleTest, so the fuzz targets include it too.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "gguf/gguf_file.h"

namespace glacier::testing {

// Equal types and values, arrays element by element; NaNs count as equal (a float32 signalling NaN may
// come back quieted).
inline bool same_gguf_value(const gguf::Value& a, const gguf::Value& b) {
  if (a.type != b.type || a.data.index() != b.data.index()) return false;
  if (const auto* x = std::get_if<double>(&a.data)) {
    const double y = std::get<double>(b.data);
    return *x == y || (std::isnan(*x) && std::isnan(y));
  }
  if (const auto* x = std::get_if<gguf::Array>(&a.data)) {
    const auto& y = std::get<gguf::Array>(b.data);
    if (x->elem_type != y.elem_type || x->items.size() != y.items.size()) return false;
    for (size_t i = 0; i < x->items.size(); ++i)
      if (!same_gguf_value(x->items[i], y.items[i])) return false;
    return true;
  }
  if (const auto* x = std::get_if<std::string>(&a.data)) return *x == std::get<std::string>(b.data);
  if (const auto* x = std::get_if<uint64_t>(&a.data)) return *x == std::get<uint64_t>(b.data);
  if (const auto* x = std::get_if<int64_t>(&a.data)) return *x == std::get<int64_t>(b.data);
  return std::get<bool>(a.data) == std::get<bool>(b.data);
}

}  // namespace glacier::testing
