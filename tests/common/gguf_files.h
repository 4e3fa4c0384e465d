// Test helper: the GGUF files below a folder (the shared models), for tests that check every one.
#pragma once
#include <string>
#include <vector>

namespace glacier::testing {

// Every .gguf file below dir (subdirectories included), sorted by path.
std::vector<std::string> gguf_files_under(const std::string& dir);

}  // namespace glacier::testing
