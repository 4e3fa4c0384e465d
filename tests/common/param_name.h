// GoogleTest names of parameterised tests made from file, model or kernel tier names, which hold '-'
// where test names take only letters, digits and '_'.
#pragma once
#include <algorithm>
#include <string>

namespace glacier::testing {

// name with every '-' as '_'.
inline std::string gtest_name(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

}  // namespace glacier::testing
