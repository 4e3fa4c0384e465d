// Runs tests/common/results_utf8_check.py (h5py) over a results file from a test, so that the file is
// checked the way a Python user reads it; reports when /usr/bin/python3 with h5py is not there.
#pragma once
#include <string>

namespace glacier::testing {

// Whether /usr/bin/python3 can import h5py (Debian's python3-h5py; other pythons may lack it).
bool have_h5py();

struct H5pyCheck {
  int exit_code = -1;
  std::string output;  // the script's summary line, or the message of the first mismatch
};

// results_utf8_check.py RESULTS.h5 [JSONL]: every string column of /results decodes with .asstr(),
// text_bytes agrees with text, and the JSONL (when given) holds the same strings.
H5pyCheck check_results_utf8(const std::string& h5, const std::string& jsonl = "");

// The integer after "key=" in the summary line, or -1 when it is not there.
long long summary_count(const H5pyCheck& check, const std::string& key);

}  // namespace glacier::testing
