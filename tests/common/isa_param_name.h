// The GoogleTest name of a test parameterised over kernel tiers: the tier's name with '-' as '_'
// (test names take only letters, digits and '_'); and a fixture that makes its tier the active one.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "common/param_name.h"
#include "kernels/dispatch.h"

namespace glacier::testing {

inline std::string isa_param_name(const ::testing::TestParamInfo<kernels::Isa>& info) {
  return gtest_name(kernels::isa_name(info.param));
}

// A test over one kernel tier, active while it runs; afterwards the best supported tier is active again.
class ActiveIsaTest : public ::testing::TestWithParam<kernels::Isa> {
 protected:
  void SetUp() override { kernels::set_active_isa(GetParam()); }
  void TearDown() override { kernels::set_active_isa(kernels::supported_isas().back()); }
};

}  // namespace glacier::testing
