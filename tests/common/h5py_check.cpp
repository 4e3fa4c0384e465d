// Runs the h5py checker script and captures what it prints.
#include "common/h5py_check.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>

namespace glacier::testing {

namespace {
constexpr const char* kPython = "/usr/bin/python3";
}

bool have_h5py() {
  return std::system((std::string(kPython) + " -c 'import h5py' >/dev/null 2>&1").c_str()) == 0;
}

H5pyCheck check_results_utf8(const std::string& h5, const std::string& jsonl) {
  H5pyCheck check;
  std::string cmd = std::string(kPython) + " " + GLACIER_SOURCE_DIR + "/tests/common/results_utf8_check.py '" + h5 +
                    "'" + (jsonl.empty() ? "" : " '" + jsonl + "'") + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) {
    check.output = "cannot run " + cmd;
    return check;
  }
  char buf[512];
  while (fgets(buf, sizeof buf, pipe)) check.output += buf;
  const int status = pclose(pipe);
  check.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return check;
}

long long summary_count(const H5pyCheck& check, const std::string& key) {
  const std::string needle = key + "=";
  for (size_t at = check.output.find(needle); at != std::string::npos; at = check.output.find(needle, at + 1))
    if (at == 0 || check.output[at - 1] == ' ') return std::atoll(check.output.c_str() + at + needle.size());
  return -1;
}

}  // namespace glacier::testing
