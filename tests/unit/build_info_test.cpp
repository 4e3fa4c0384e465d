// The build's version and git commit (generated at build time) and glacier_mpi --version printing both.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "app/options.h"
#include "version/build_info.h"

namespace {

TEST(BuildInfo, VersionIsTheProjectsAndCommitIsGitsOrUnknown) {
  EXPECT_TRUE(std::regex_match(glacier::build_version(), std::regex("[0-9]+\\.[0-9]+\\.[0-9]+")))
      << glacier::build_version();
  // git describe --always: an abbreviated hash (or tag-count-ghash), "-dirty" with uncommitted changes.
  EXPECT_TRUE(std::regex_match(glacier::build_commit(), std::regex("unknown|[0-9A-Za-z._/-]*[0-9a-f]{7,}(-dirty)?")))
      << glacier::build_commit();
}

TEST(BuildInfo, GlacierMpiVersionPrintsVersionAndCommit) {
  std::vector<const char*> argv = {"glacier_mpi", "--version"};
  ::testing::internal::CaptureStdout();
  const auto options = glacier::app::parse_options(static_cast<int>(argv.size()), argv.data());
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_FALSE(options.has_value()) << "--version must end the program";
  EXPECT_EQ(printed, std::string("glacier_mpi ") + glacier::build_version() + " (commit " + glacier::build_commit() +
                         ")\n");
}

}  // namespace
