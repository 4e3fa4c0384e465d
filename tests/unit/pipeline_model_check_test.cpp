// The pipeline model's self-check (benchmarks/scaling/pipeline_model.py experts --check) under ctest: the
// memory split of pipeline stages against expert groups adds up to the file, one member a group is the
// pipeline-only prediction exactly, and the routing draws agree with the exact busiest-member load.
#include <gtest/gtest.h>

#include <string>

#include "common/h5py_check.h"

namespace {

TEST(PipelineModel, ExpertParallelEntryPassesItsSelfCheck) {
  if (!glacier::testing::have_python_modules("numpy, scipy"))
    GTEST_SKIP() << "needs /usr/bin/python3 with numpy and scipy (env/install-deps.sh: python3-numpy python3-scipy)";
  const auto check = glacier::testing::run_python_script(
      std::string(GLACIER_SOURCE_DIR) + "/benchmarks/scaling/pipeline_model.py", {"experts", "--check"});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("ok   memory split"), std::string::npos) << check.output;
  EXPECT_NE(check.output.find("ok   E = 1 against the PP-only model"), std::string::npos) << check.output;
}

}  // namespace
