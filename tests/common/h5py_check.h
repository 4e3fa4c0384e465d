// Runs tests/common/results_utf8_check.py (h5py) over a results file from a test, so that the file is
// checked the way a Python user reads it; reports when /usr/bin/python3 with h5py is not there.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace glacier::testing {

// Whether /usr/bin/python3 can import h5py (Debian's python3-h5py; other pythons may lack it).
bool have_h5py();
// Whether /usr/bin/python3 can import every module named ("h5py, pandas", as an import statement lists them).
bool have_python_modules(const std::string& modules);

struct H5pyCheck {
  int exit_code = -1;
  std::string output;  // the script's summary line, or the message of the first mismatch
};

// results_utf8_check.py RESULTS.h5 [JSONL]: every string column of /results decodes with .asstr(),
// text_bytes agrees with text, and the JSONL (when given) holds the same strings.
H5pyCheck check_results_utf8(const std::string& h5, const std::string& jsonl = "");

// The script at `path` ARGS... under /usr/bin/python3 (each argument single-quoted), output captured.
H5pyCheck run_python_script(const std::string& path, const std::vector<std::string>& args);
// run_python_script of tests/common/<script>.
H5pyCheck run_python_check(const std::string& script, const std::vector<std::string>& args);

// The rows h5py sees in a results file (its shortest /results column) are `rows`. Without h5py it says
// so and checks nothing (the callers have read the file with read_finished).
void expect_h5py_row_count(const std::string& h5, size_t rows);

// The integer after "key=" in the summary line, or -1 when it is not there.
long long summary_count(const H5pyCheck& check, const std::string& key);

}  // namespace glacier::testing
