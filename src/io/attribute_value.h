// A provenance attribute of a results file: text, integer or real (model path, sizes, options...).
#pragma once
#include <cstdint>
#include <string>
#include <variant>

namespace glacier::io {

using AttributeValue = std::variant<std::string, int64_t, double>;

}  // namespace glacier::io
