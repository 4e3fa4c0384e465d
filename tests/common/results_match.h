// Comparing HDF5 results row by row with a reference run: everything that does not depend on timing,
// log-probs bit for bit (the engine is batch-invariant, so any layout must reproduce them exactly).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "io/result_record.h"

namespace glacier::testing {

using RowsById = std::map<std::string, io::ResultRecord>;

// The rows keyed by id; a repeated id is a test failure (named with `what`).
RowsById rows_by_id(const std::vector<io::ResultRecord>& rows, const std::string& what);

// Every row has a unique id found in `reference` and equals that row in index, status, error, prompt
// tokens, tokens, log-prob bits, text and finish reason. Failures name `what` and the row's id.
void expect_rows_match(const std::vector<io::ResultRecord>& rows, const RowsById& reference, const std::string& what);

// expect_rows_match, and every reference id is present: the same results, whatever their order.
void expect_same_results(const std::vector<io::ResultRecord>& rows, const RowsById& reference, const std::string& what);

}  // namespace glacier::testing
