// Test helper: the GGUF files below a folder.
#include "common/gguf_files.h"

#include <algorithm>
#include <filesystem>

namespace glacier::testing {

std::vector<std::string> gguf_files_under(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".gguf") paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace glacier::testing
