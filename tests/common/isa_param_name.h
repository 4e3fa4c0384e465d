// The GoogleTest name of a test parameterised over kernel tiers: the tier's name with '-' as '_'
// (test names take only letters, digits and '_').
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "kernels/dispatch.h"

namespace glacier::testing {

inline std::string isa_param_name(const ::testing::TestParamInfo<kernels::Isa>& info) {
  std::string name = kernels::isa_name(info.param);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

}  // namespace glacier::testing
