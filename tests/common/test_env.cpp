// Test helpers: shared-folder lookup, JSON and text reading, reference prompt splitting.
#include "common/test_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <sstream>

namespace fs = std::filesystem;

namespace glacier::testing {

std::optional<std::string> shared_dir() {
  const char* env = std::getenv("GLACIER_SHARED_DIR");
  std::string dir = env && *env ? env : std::string(GLACIER_SOURCE_DIR) + "/../shared";
  if (fs::is_directory(dir)) return dir;
  return std::nullopt;
}

std::string shared_path(const std::string& relative) {
  auto dir = shared_dir();
  if (!dir) return "";
  std::string p = *dir + "/" + relative;
  return fs::exists(p) ? p : "";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_text(path)); }

std::vector<std::string> split_reference_entries(const std::string& text) {
  std::string body = text;
  if (!body.empty() && body.back() == '\n') body.pop_back();
  const std::string sep = "\n----8<----\n";
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = body.find(sep, start);
    if (pos == std::string::npos) {
      out.push_back(body.substr(start));
      break;
    }
    out.push_back(body.substr(start, pos - start));
    start = pos + sep.size();
  }
  return out;
}

namespace {

// Removes the process's scratch directories when it exits, unless a test failed (the files are then
// what one looks at) or GLACIER_KEEP_SCRATCH is set: thousands of test runs must not fill /tmp.
class ScratchDirs {
 public:
  void add(const fs::path& p) { dirs_.push_back(p); }
  ~ScratchDirs() {
    const char* keep = std::getenv("GLACIER_KEEP_SCRATCH");
    if ((keep && *keep) || !::testing::UnitTest::GetInstance()->Passed()) return;
    std::error_code ignored;  // best effort: a leftover directory is no reason to fail a passed test
    for (const fs::path& p : dirs_) fs::remove_all(p, ignored);
  }

 private:
  std::vector<fs::path> dirs_;
};

}  // namespace

std::string scratch_dir(const std::string& name) {
  // Constructed after GoogleTest's UnitTest singleton, so destroyed before it.
  static ScratchDirs dirs;
  fs::path p = fs::temp_directory_path() / ("glacier-test-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  dirs.add(p);
  return p.string();
}

}  // namespace glacier::testing
