// The log's level filter (--log-level, whose words app_options_test checks): lines below the level are not written.
#include <gtest/gtest.h>

#include <string>

#include "util/log.h"

namespace {

namespace log = glacier::log;

// Restores the process-wide level and rank whatever a test set.
class LogLevel : public ::testing::Test {
 protected:
  void TearDown() override {
    log::set_level(log::Level::Info);
    log::set_rank(-1);
  }
};

TEST_F(LogLevel, WritesOnlyLinesAtOrAboveTheLevel) {
  log::set_rank(3);
  log::set_level(log::Level::Warn);
  testing::internal::CaptureStderr();
  GLACIER_LOG_DEBUG("a debug line");
  GLACIER_LOG_INFO("an info line");
  GLACIER_LOG_WARN("a warning %d", 7);
  GLACIER_LOG_ERROR("an error");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "rank 3: warning: a warning 7\nrank 3: error: an error\n");

  log::set_level(log::Level::Debug);
  testing::internal::CaptureStderr();
  GLACIER_LOG_DEBUG("a debug line");
  GLACIER_LOG_INFO("an info line");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "rank 3: debug: a debug line\nrank 3: an info line\n");
}

}  // namespace
