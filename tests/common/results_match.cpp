// Row-by-row comparison of results with a reference run (see results_match.h).
#include "common/results_match.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>

namespace glacier::testing {
namespace {

std::vector<uint32_t> float_bits(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  if (!values.empty()) std::memcpy(bits.data(), values.data(), sizeof(float) * values.size());
  return bits;
}

}  // namespace

RowsById rows_by_id(const std::vector<io::ResultRecord>& rows, const std::string& what) {
  RowsById by_id;
  for (const io::ResultRecord& row : rows)
    EXPECT_TRUE(by_id.emplace(row.id, row).second) << what << ": id " << row.id << " appears twice";
  return by_id;
}

void expect_rows_match(const std::vector<io::ResultRecord>& rows, const RowsById& reference, const std::string& what) {
  std::set<std::string> seen;
  for (const io::ResultRecord& row : rows) {
    EXPECT_TRUE(seen.insert(row.id).second) << what << ": id " << row.id << " appears twice";
    const auto it = reference.find(row.id);
    if (it == reference.end()) {
      ADD_FAILURE() << what << ": row id " << row.id << " is not in the reference run";
      continue;
    }
    const io::ResultRecord& want = it->second;
    EXPECT_EQ(row.index, want.index) << what << " " << row.id;
    EXPECT_EQ(row.status, want.status) << what << " " << row.id << ": " << row.error;
    EXPECT_EQ(row.error, want.error) << what << " " << row.id;
    EXPECT_EQ(row.prompt_tokens, want.prompt_tokens) << what << " " << row.id;
    EXPECT_EQ(row.tokens, want.tokens) << what << " " << row.id;
    EXPECT_EQ(float_bits(row.logprobs), float_bits(want.logprobs)) << what << " " << row.id << ": log-prob bits";
    EXPECT_EQ(row.text, want.text) << what << " " << row.id;
    EXPECT_EQ(row.finish_reason, want.finish_reason) << what << " " << row.id;
  }
}

void expect_same_results(const std::vector<io::ResultRecord>& rows, const RowsById& reference, const std::string& what) {
  expect_rows_match(rows, reference, what);
  std::set<std::string> ids;
  for (const io::ResultRecord& row : rows) ids.insert(row.id);
  for (const auto& [id, row] : reference) EXPECT_TRUE(ids.count(id)) << what << ": no row for prompt " << id;
  EXPECT_EQ(rows.size(), reference.size()) << what << ": row count";
}

}  // namespace glacier::testing
