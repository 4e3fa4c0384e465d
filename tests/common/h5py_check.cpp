// Runs the Python checker scripts (h5py, the results module) and captures what they print.
#include "common/h5py_check.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>

namespace glacier::testing {

namespace {
constexpr const char* kPython = "/usr/bin/python3";

// Runs a shell command, its output (stdout and stderr, as the command redirects them) captured.
H5pyCheck run_captured(const std::string& cmd) {
  H5pyCheck check;
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
}  // namespace

bool have_python_modules(const std::string& modules) {
  return std::system((std::string(kPython) + " -c 'import " + modules + "' >/dev/null 2>&1").c_str()) == 0;
}

bool have_h5py() { return have_python_modules("h5py"); }

H5pyCheck run_python_script(const std::string& path, const std::vector<std::string>& args) {
  std::string cmd = std::string(kPython) + " " + path;
  for (const auto& a : args) cmd += " '" + a + "'";
  return run_captured(cmd + " 2>&1");
}

H5pyCheck run_python_check(const std::string& script, const std::vector<std::string>& args) {
  return run_python_script(std::string(GLACIER_SOURCE_DIR) + "/tests/common/" + script, args);
}

H5pyCheck check_results_utf8(const std::string& h5, const std::string& jsonl) {
  std::vector<std::string> args{h5};
  if (!jsonl.empty()) args.push_back(jsonl);
  return run_python_check("results_utf8_check.py", args);
}

void expect_h5py_row_count(const std::string& h5, size_t rows) {
  if (!have_h5py()) {
    std::printf("h5py is not installed: %s was checked with read_finished only\n", h5.c_str());
    return;
  }
  const H5pyCheck count = run_captured(std::string(kPython) +
                                       " -c 'import sys, h5py\n"
                                       "with h5py.File(sys.argv[1], \"r\") as f:\n"
                                       "    print(min(len(d) for d in f[\"results\"].values()))' " +
                                       h5 + " 2>&1");
  ASSERT_EQ(count.exit_code, 0) << "h5py: " << count.output;
  EXPECT_EQ(std::atoll(count.output.c_str()), static_cast<long long>(rows)) << "h5py: " << count.output;
}

long long summary_count(const H5pyCheck& check, const std::string& key) {
  const std::string needle = key + "=";
  for (size_t at = check.output.find(needle); at != std::string::npos; at = check.output.find(needle, at + 1))
    if (at == 0 || check.output[at - 1] == ' ') return std::atoll(check.output.c_str() + at + needle.size());
  return -1;
}

}  // namespace glacier::testing
