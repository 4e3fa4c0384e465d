// A stories260K job whose sampling picks byte-fallback tokens (<0xE2> and the like, so texts end or
// break inside a character): every HDF5 string column decodes with h5py .asstr(), HDF5 and JSONL hold
// the same text, text_bytes keeps the bytes, and a run resumed from a file holding those rows writes
// the uninterrupted run's JSONL byte for byte.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/h5py_check.h"
#include "common/job_runner.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"
#include "io/utf8.h"

namespace {

using glacier::testing::read_text;
using glacier::testing::run_glacier;

constexpr int kRanks = 2;  // a pipeline: the texts cross ranks as tokens and are spelled on rank 0
constexpr int kPromptCount = 12;
constexpr int kFirstRunPrompts = 6;  // the part an interrupted run finished before --resume
constexpr int kMaxTokens = 24;
// stories260K's 512-token vocabulary holds 256 byte tokens. At temperature 100 sampling is nearly
// uniform, so about half the tokens drawn are single bytes and most texts hold an ill-formed
// sequence: the test does not depend on one seed hitting one byte on every machine.
constexpr double kHotTemperature = 100.0;
constexpr int kJobTimeLimitS = 60;

std::string write_prompts(const std::string& path, int count) {
  std::ofstream out(path);
  for (int i = 0; i < count; ++i) {
    std::string id = "p";  // built with += (GCC 12 warns falsely on "p" + std::to_string(i))
    id += std::to_string(i);
    nlohmann::json line = {{"id", id}, {"prompt", i % 2 ? "Once upon a time" : "Lily saw"}};
    if (i % 4 != 3) {  // every fourth prompt greedy: plain text rows beside the byte-laden ones
      line["temperature"] = kHotTemperature;
      line["seed"] = 100 + i;
    }
    out << line.dump() << "\n";
  }
  return path;
}

std::string job_args(const std::string& model, const std::string& prompts, const std::string& h5,
                     const std::string& jsonl) {
  return "--model " + model + " --prompts " + prompts + " --out " + h5 + " --jsonl " + jsonl + " --max-tokens " +
         std::to_string(kMaxTokens);
}

TEST(JobUtf8Text, ByteTokensGiveValidUtf8ColumnsAndResumeKeepsTheirBytes) {
  GLACIER_REQUIRE_SHARED(model, "models/stories260K.gguf");
  const std::string dir = glacier::testing::scratch_dir("job_utf8_text");
  const std::string prompts = write_prompts(dir + "/prompts.jsonl", kPromptCount);
  const std::string first_prompts = write_prompts(dir + "/first.jsonl", kFirstRunPrompts);

  const std::string ref_h5 = dir + "/ref.h5", ref_jsonl = dir + "/ref.jsonl";
  const auto ref = run_glacier(kRanks, job_args(model, prompts, ref_h5, ref_jsonl), kJobTimeLimitS);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const auto rows = glacier::io::read_finished(ref_h5).rows;
  ASSERT_EQ(rows.size(), size_t{kPromptCount});
  int ill_formed = 0, with_bytes = 0;  // with_bytes: also a NUL byte token, which HDF5 strings cannot hold
  for (const auto& row : rows) {
    const bool bad = glacier::io::find_invalid_utf8(row.text).has_value();
    ill_formed += bad;
    with_bytes += bad || row.text.find('\0') != std::string::npos;
  }
  ASSERT_GT(ill_formed, 0) << "no text holds a byte-fallback token that breaks UTF-8: nothing to check";
  std::printf("%d of %d texts hold ill-formed UTF-8\n", ill_formed, kPromptCount);

  // The first part of the prompts, then --resume over all of them: the resumed JSONL re-emits the
  // first part from the HDF5 file, which must give back the bytes the JSONL shows.
  const std::string h5 = dir + "/run.h5", jsonl = dir + "/run.jsonl";
  const auto first = run_glacier(kRanks, job_args(model, first_prompts, h5, jsonl), kJobTimeLimitS);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto resumed = run_glacier(kRanks, job_args(model, prompts, h5, jsonl) + " --resume", kJobTimeLimitS);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(read_text(jsonl), read_text(ref_jsonl)) << "the resumed JSONL differs from the uninterrupted run's";
  const auto resumed_rows = glacier::io::read_finished(h5).rows;
  ASSERT_EQ(resumed_rows.size(), rows.size());
  for (const auto& row : resumed_rows) {
    ASSERT_LT(row.index, kPromptCount);
    EXPECT_EQ(row.text, rows[static_cast<size_t>(row.index)].text) << "row " << row.id;
  }

  if (!glacier::testing::have_h5py()) GTEST_SKIP() << "/usr/bin/python3 with h5py not found: h5py check skipped";
  for (const auto& [results, lines] : {std::pair{ref_h5, ref_jsonl}, std::pair{h5, jsonl}}) {
    const auto check = glacier::testing::check_results_utf8(results, lines);
    EXPECT_EQ(check.exit_code, 0) << results << ": " << check.output;
    EXPECT_EQ(glacier::testing::summary_count(check, "rows_with_text_bytes"), with_bytes) << check.output;
    EXPECT_EQ(glacier::testing::summary_count(check, "jsonl_rows_compared"), kPromptCount) << check.output;
  }
}

}  // namespace
