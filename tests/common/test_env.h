// Test helpers: where ../shared is (GLACIER_SHARED_DIR), skipping with a clear message when it is
// absent, and reading the reference files' formats.
#pragma once
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace glacier::testing {

// The shared folder if it exists: $GLACIER_SHARED_DIR, else ../shared beside the source checkout.
std::optional<std::string> shared_dir();
// Path of a file under the shared folder, or "" when the folder or the file is absent.
std::string shared_path(const std::string& relative);
nlohmann::json read_json(const std::string& path);
std::string read_text(const std::string& path);
// Splits a reference prompt file on "\n----8<----\n" (the final newline is not part of the last entry).
std::vector<std::string> split_reference_entries(const std::string& text);
// A fresh scratch directory for one test, removed when the test process exits after passing (kept when
// a test failed or GLACIER_KEEP_SCRATCH is set).
std::string scratch_dir(const std::string& name);

}  // namespace glacier::testing

// Skips the current test when a shared file is missing, naming it.
#define GLACIER_REQUIRE_SHARED(var, relative)                                                  \
  std::string var = ::glacier::testing::shared_path(relative);                                 \
  if (var.empty()) GTEST_SKIP() << "needs " << (relative)                                       \
                                << " under GLACIER_SHARED_DIR (../shared): not found, skipped"
