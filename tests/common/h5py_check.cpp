// Runs the Python checker scripts (h5py, the results module) and captures what they print.
#include "common/h5py_check.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>

namespace glacier::testing {

namespace {
constexpr const char* kPython = "/usr/bin/python3";
}

bool have_python_modules(const std::string& modules) {
  return std::system((std::string(kPython) + " -c 'import " + modules + "' >/dev/null 2>&1").c_str()) == 0;
}

bool have_h5py() { return have_python_modules("h5py"); }

H5pyCheck run_python_check(const std::string& script, const std::vector<std::string>& args) {
  H5pyCheck check;
  std::string cmd = std::string(kPython) + " " + GLACIER_SOURCE_DIR + "/tests/common/" + script;
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
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

H5pyCheck check_results_utf8(const std::string& h5, const std::string& jsonl) {
  std::vector<std::string> args{h5};
  if (!jsonl.empty()) args.push_back(jsonl);
  return run_python_check("results_utf8_check.py", args);
}

long long summary_count(const H5pyCheck& check, const std::string& key) {
  const std::string needle = key + "=";
  for (size_t at = check.output.find(needle); at != std::string::npos; at = check.output.find(needle, at + 1))
    if (at == 0 || check.output[at - 1] == ' ') return std::atoll(check.output.c_str() + at + needle.size());
  return -1;
}

}  // namespace glacier::testing
