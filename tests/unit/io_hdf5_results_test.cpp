// The HDF5 results file: exact round trip of every column through read_finished, provenance
// attributes, resume, a writer killed after flushing (fork + _exit), path checks, h5py readability,
// and UTF-8 string columns that agree with the JSONL while text_bytes keeps the exact text.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "common/h5py_check.h"
#include "common/input_error.h"
#include "common/test_env.h"
#include "io/hdf5_results.h"
#include "io/jsonl_writer.h"
#include "io/utf8.h"
#include "util/error.h"

namespace glacier::io {
namespace {

using glacier::testing::expect_input_error;

// Row i of a deterministic, varied result set: empty vectors and strings at some rows, a score every
// third row, invalid UTF-8 in text (kept exactly by text_bytes).
ResultRecord make_result(int i) {
  ResultRecord r;
  r.id = "id-" + std::to_string(i);
  r.index = i;
  r.status = i % 7 == 3 ? "error" : "ok";
  r.error = r.status == "error" ? "line " + std::to_string(i) + ": bad" : "";
  for (int k = 0; k < i % 5; ++k) r.prompt_tokens.push_back(1000 * i + k);
  for (int k = 0; k < (i * 3) % 4; ++k) {
    r.tokens.push_back(i + k);
    r.logprobs.push_back(-0.1f * static_cast<float>(k + 1) / static_cast<float>(i + 1));
  }
  r.text = i % 4 == 0 ? "" : "tok\xC3 " + std::to_string(i);
  r.finish_reason = i % 2 ? "length" : "stop";
  r.time_to_first_token_s = 0.001 * i + 1e-9;
  r.total_time_s = 0.01 * i + 1.0 / 3.0;
  r.score = i % 3 == 0;
  r.sum_logprob = r.score ? -1.5 * i - 1.0 / 7.0 : 0;
  r.greedy = r.score && i % 2 == 0;
  return r;
}

void expect_same(const ResultRecord& a, const ResultRecord& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.logprobs, b.logprobs);  // exact: float32 stored as float32
  EXPECT_EQ(a.finish_reason, b.finish_reason);
  EXPECT_EQ(a.time_to_first_token_s, b.time_to_first_token_s);
  EXPECT_EQ(a.total_time_s, b.total_time_s);
  EXPECT_EQ(a.score, b.score);
  EXPECT_EQ(a.sum_logprob, b.sum_logprob);
  EXPECT_EQ(a.greedy, b.greedy);
}

// The file read back holds exactly the rows make_result(0) .. make_result(n - 1), in order.
void expect_made_rows(const FinishedResults& back, int n) {
  ASSERT_EQ(back.rows.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    expect_same(back.rows[i], make_result(i));
  }
}

// An ok row with index `index` (make_result's other columns), its tokens and log-probs set by the caller.
ResultRecord ok_row(int64_t index) {
  ResultRecord r = make_result(static_cast<int>(index) + 1);
  r.index = index;
  r.status = "ok";
  r.error.clear();
  return r;
}

using glacier::testing::have_h5py;

TEST(IoHdf5Results, RoundTripEveryColumnWithSeveralFlushes) {
  const std::string path = glacier::testing::scratch_dir("io_h5") + "/results.h5";
  constexpr int kRows = 2500;  // more than one chunk (1024 rows) per column
  {
    ResultsFile file(path, ResultsFile::Mode::Create);
    file.set_attribute("model_file", std::string("models/tiny.gguf"));
    file.set_attribute("model_size", int64_t{123456789012});
    file.set_attribute("temperature", 0.7);
    file.set_attribute("model_size", int64_t{42});  // replaced, not duplicated
    for (int i = 0; i < kRows; ++i) {
      file.append(make_result(i));
      if (i % 300 == 299) file.flush();
    }
    EXPECT_GT(file.rows_buffered(), 0u);
    file.close();
    EXPECT_EQ(file.rows_written(), kRows);
  }
  FinishedResults back = read_finished(path);
  ASSERT_NO_FATAL_FAILURE(expect_made_rows(back, kRows));
  EXPECT_EQ(std::get<std::string>(back.attributes.at("model_file")), "models/tiny.gguf");
  EXPECT_EQ(std::get<int64_t>(back.attributes.at("model_size")), 42);
  EXPECT_EQ(std::get<double>(back.attributes.at("temperature")), 0.7);
  EXPECT_EQ(read_root_attributes(path), back.attributes) << "the attributes alone, as --partition-from reads them";
}

TEST(IoHdf5Results, ResumeAppendsAfterTheRowsAlreadyThere) {
  const std::string path = glacier::testing::scratch_dir("io_h5_resume") + "/results.h5";
  {
    ResultsFile file(path, ResultsFile::Mode::Create);
    for (int i = 0; i < 10; ++i) file.append(make_result(i));
  }  // destructor flushes and closes
  {
    ResultsFile file(path, ResultsFile::Mode::Resume);
    EXPECT_EQ(file.rows_written(), 10);
    for (int i = 10; i < 15; ++i) file.append(make_result(i));
    file.close();
  }
  expect_made_rows(read_finished(path), 15);
}

// A job killed (SIGKILL, no close) after some flushes must leave a file that opens and holds every
// flushed row. The child writes, flushes, buffers more, then _exit()s without any HDF5 cleanup.
TEST(IoHdf5Results, KilledWriterKeepsEveryFlushedRow) {
  const std::string path = glacier::testing::scratch_dir("io_h5_killed") + "/results.h5";
  constexpr int kFlushed = 700, kUnflushed = 50;
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      auto* file = new ResultsFile(path, ResultsFile::Mode::Create);  // never destroyed: like a kill
      file->set_attribute("model_file", std::string("m.gguf"));
      for (int i = 0; i < kFlushed; ++i) {
        file->append(make_result(i));
        if (i % 100 == 99) file->flush();
      }
      for (int i = kFlushed; i < kFlushed + kUnflushed; ++i) file->append(make_result(i));
    } catch (...) {
      _exit(3);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child writer failed";

  FinishedResults back = read_finished(path);
  ASSERT_NO_FATAL_FAILURE(expect_made_rows(back, kFlushed));
  EXPECT_EQ(std::get<std::string>(back.attributes.at("model_file")), "m.gguf");

  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 with h5py not found: h5py check skipped";
  std::string cmd = "/usr/bin/python3 -c \"import h5py,sys; f=h5py.File(sys.argv[1],'r'); "
                    "n=len(f['results/index']); t=f['results/tokens'][5]; "
                    "sys.exit(0 if n==" + std::to_string(kFlushed) + " and list(t)==[5,6,7] else 1)\" " + path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(IoHdf5Results, ResumeAfterKillContinuesFromTheFlushedRows) {
  const std::string path = glacier::testing::scratch_dir("io_h5_kill_resume") + "/results.h5";
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto* file = new ResultsFile(path, ResultsFile::Mode::Create);
    for (int i = 0; i < 20; ++i) file->append(make_result(i));
    file->flush();
    file->append(make_result(20));
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  {
    ResultsFile file(path, ResultsFile::Mode::Resume);
    EXPECT_EQ(file.rows_written(), 20);
    for (int i = 20; i < 25; ++i) file.append(make_result(i));
  }
  expect_made_rows(read_finished(path), 25);
}

TEST(IoHdf5Results, BadPathsAreInputErrorsNamingThePath) {
  const std::string dir = glacier::testing::scratch_dir("io_h5_paths");
  const std::string missing = dir + "/no/such/dir/r.h5";
  EXPECT_THROW(check_writable(missing), InputError);
  EXPECT_THROW(check_writable(dir), InputError);  // a directory, not a file
  EXPECT_NO_THROW(check_writable(dir + "/r.h5"));
  expect_input_error([&] { ResultsFile file(missing, ResultsFile::Mode::Create); }, {missing});
  EXPECT_THROW(ResultsFile(dir + "/absent.h5", ResultsFile::Mode::Resume), InputError);
  EXPECT_THROW(read_finished(dir + "/absent.h5"), InputError);
  const std::string not_hdf5 = dir + "/text.h5";
  std::ofstream(not_hdf5) << "not an HDF5 file\n";
  EXPECT_THROW(read_finished(not_hdf5), InputError);
}

TEST(IoHdf5Results, ColumnsReadableWithH5py) {
  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 with h5py not found: skipped";
  const std::string path = glacier::testing::scratch_dir("io_h5_h5py") + "/results.h5";
  {
    ResultsFile file(path, ResultsFile::Mode::Create);
    file.set_attribute("version", std::string("0.1.0"));
    for (int i = 0; i < 8; ++i) file.append(make_result(i));
  }
  // id 2 text "tok\xC3 2": U+FFFD in text, the bytes in text_bytes; logprobs of row 1 as float32,
  // greedy -1 for non-scores.
  std::string script =
      "import h5py,sys,numpy as np\n"
      "f=h5py.File(sys.argv[1],'r'); r=f['results']\n"
      "assert r['id'].asstr()[2]=='id-2'\n"
      "assert r['text'].asstr()[2]=='tok\\ufffd 2'\n"
      "assert r['text_bytes'][2].tobytes()==b'tok\\xc3 2' and len(r['text_bytes'][1])==len(b'tok\\xc3 1')\n"
      "assert r['logprobs'][3].dtype==np.float32 and len(r['logprobs'][3])==1\n"
      "assert list(r['greedy'][:4])==[1,-1,-1,0]\n"
      "assert list(r['index'][:])==list(range(8))\n"
      "assert f.attrs['version'] in ('0.1.0', b'0.1.0')\n";
  const std::string script_path = path + ".py";
  std::ofstream(script_path) << script;
  EXPECT_EQ(std::system(("/usr/bin/python3 " + script_path + " " + path).c_str()), 0);
}

// Rows whose strings carry what a byte-fallback tokenizer and prompt files can put there: a character
// cut short, a lone byte, a NUL byte token, bad bytes in an id and an error message; and valid text.
std::vector<ResultRecord> awkward_results() {
  std::vector<ResultRecord> rows(6);
  for (int i = 0; i < 6; ++i) {
    rows[i].id = "row-" + std::to_string(i);
    rows[i].index = i;
    rows[i].finish_reason = "length";
  }
  rows[0].text = "caf\xC3";                             // a token boundary inside "é"
  rows[1].text = " gq n of C\xE1 chat \xE2\x80\x94 w";  // a lone byte token between valid ones
  rows[2].text = std::string("a\0b\xF0\x9F\x98", 6);    // a NUL byte token, a cut emoji
  rows[3].text = "valid: caf\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x98\x80";
  rows[4].id = "row-\xFF" "4";
  rows[4].status = "error";
  rows[4].error = "prompts.txt:5: found \xE0\x80\x80";
  rows[4].finish_reason = "error";
  rows[5].text = std::string("\0", 1);
  return rows;
}

TEST(IoHdf5Results, StringColumnsAreUtf8LikeTheJsonlAndTextBytesKeepTheText) {
  const std::string dir = glacier::testing::scratch_dir("io_h5_utf8");
  const std::string path = dir + "/results.h5", jsonl = dir + "/results.jsonl";
  const std::vector<ResultRecord> rows = awkward_results();
  {
    ResultsFile file(path, ResultsFile::Mode::Create);
    for (const auto& r : rows) file.append(r);
    file.close();
  }
  write_results_jsonl(jsonl, rows);

  // read_finished (--resume) gets each text back byte for byte; id and error, which have no byte
  // column, come back as the repaired strings the file shows.
  const FinishedResults back = read_finished(path);
  ASSERT_EQ(back.rows.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    EXPECT_EQ(back.rows[i].text, rows[i].text);
    EXPECT_EQ(back.rows[i].id, replace_invalid_utf8_and_nul(rows[i].id));
    EXPECT_EQ(back.rows[i].error, replace_invalid_utf8_and_nul(rows[i].error));
    EXPECT_FALSE(find_invalid_utf8(back.rows[i].id).has_value());
  }
  // So a resumed run's JSONL lines of these rows are the uninterrupted run's (the NUL included).
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i == 4) continue;  // its id and error were repaired on disk
    EXPECT_EQ(format_result_line(back.rows[i]), format_result_line(rows[i])) << "row " << i;
  }

  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 with h5py not found: the h5py check is skipped";
  const auto check = glacier::testing::check_results_utf8(path, jsonl);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_EQ(glacier::testing::summary_count(check, "rows"), 6) << check.output;
  // Rows 0, 1, 2 and 5 hold text that UTF-8 strings cannot; row 3's valid text needs no byte copy.
  EXPECT_EQ(glacier::testing::summary_count(check, "rows_with_text_bytes"), 4) << check.output;
  EXPECT_EQ(glacier::testing::summary_count(check, "jsonl_rows_compared"), 6) << check.output;
}

// The checker must catch what it is there for: a text column that is not text_bytes repaired.
TEST(IoHdf5Results, H5pyCheckRejectsATextColumnThatDisagreesWithTextBytes) {
  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 with h5py not found: skipped";
  const std::string path = glacier::testing::scratch_dir("io_h5_utf8_bad") + "/results.h5";
  {
    ResultsFile file(path, ResultsFile::Mode::Create);
    for (const auto& r : awkward_results()) file.append(r);
  }
  const std::string edit = "/usr/bin/python3 -c \"import h5py,sys; f=h5py.File(sys.argv[1],'r+'); "
                           "f['results/text'][0]='caf'\" " + path;
  ASSERT_EQ(std::system(edit.c_str()), 0) << edit;
  const auto check = glacier::testing::check_results_utf8(path);
  EXPECT_EQ(check.exit_code, 1) << check.output;
  EXPECT_NE(check.output.find("row 0"), std::string::npos) << check.output;
}

// Format 3 added the sample column: a row's sample reads back; a format-2 file (one row a prompt, no
// sample to match rows by) is refused for --resume, naming both formats.
TEST(IoHdf5Results, TheSampleColumnRoundTripsAndAFormatTwoFileIsRefused) {
  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 with h5py not found: needed to make a format-2 file";
  const std::string path = glacier::testing::scratch_dir("io_h5_format2") + "/results.h5";
  {
    ResultsFile file(path, ResultsFile::Mode::Create);
    for (int i = 0; i < 3; ++i) {
      ResultRecord r = make_result(i);
      r.sample = 2 - i;
      file.append(r);
    }
  }
  const FinishedResults back = read_finished(path);
  ASSERT_EQ(back.rows.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(back.rows[static_cast<size_t>(i)].sample, 2 - i);
  const std::string to_format_two = "/usr/bin/python3 -c \"import h5py,sys; f=h5py.File(sys.argv[1],'r+'); "
                                    "del f['results/sample']; f.attrs['glacier_results_format']=2\" " + path;
  ASSERT_EQ(std::system(to_format_two.c_str()), 0) << to_format_two;
  expect_input_error([&] { read_finished(path); }, {"expected results format 4, found 2"});
}

// Reading an old-format file back, and resuming it, are both refused naming the path and both formats.
void expect_old_format_refused(const std::string& path, int found_format,
                               const char* caller_file = __builtin_FILE(), int caller_line = __builtin_LINE()) {
  const std::string formats = "expected results format 4, found " + std::to_string(found_format);
  expect_input_error([&] { read_finished(path); }, {formats, path}, caller_file, caller_line);
  expect_input_error([&] { ResultsFile file(path, ResultsFile::Mode::Resume); }, {formats, path}, caller_file, caller_line);
}

// A file of results format 1 (no text_bytes column) stays readable and can be resumed: the column is
// added, the earlier rows' texts read as their text column holds them.
// A format-1 file has no prompt digests, so nothing can tell which prompt each of its rows answered:
// reading it back for --resume is refused, naming both formats.
TEST(IoHdf5Results, AFormatOneFileIsRefusedNamingTheFormats) {
  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 with h5py not found: needed to make a format-1 file";
  const std::string path = glacier::testing::scratch_dir("io_h5_format1") + "/results.h5";
  {
    ResultsFile file(path, ResultsFile::Mode::Create);
    for (int i = 0; i < 5; ++i) file.append(make_result(i));
  }
  const std::string to_format_one = "/usr/bin/python3 -c \"import h5py,sys; f=h5py.File(sys.argv[1],'r+'); "
                                    "del f['results/prompt_digest']; f.attrs['glacier_results_format']=1\" " + path;
  ASSERT_EQ(std::system(to_format_one.c_str()), 0) << to_format_one;
  expect_old_format_refused(path, 1);
}

// Format 2 had no top-logprob columns: a format-3 reader refuses it, naming both formats, on read and
// on resume. (The version attribute is what is checked first, so rewriting it makes a format-2 file.)
TEST(IoHdf5Results, AFormatTwoFileIsRefusedNamingTheFormats) {
  const std::string path = glacier::testing::scratch_dir("io_h5_format2") + "/results.h5";
  {
    ResultsFile file(path, ResultsFile::Mode::Create);
    for (int i = 0; i < 3; ++i) file.append(make_result(i));
    file.set_attribute("glacier_results_format", int64_t{2});
  }
  expect_old_format_refused(path, 2);
}

// Rows that asked for 0, 1 and 3 alternatives in a file 3 wide: on disk each token has 3 slots, the
// unasked ones holding the markers (-1, NaN); read back, every row has exactly its own alternatives
// (narrowing would refuse a row whose stored list is not tokens x width).
TEST(IoHdf5Results, TopLogprobsRoundTripAtTheFileWidth) {
  const std::string path = glacier::testing::scratch_dir("io_h5_top") + "/results.h5";
  constexpr int32_t kWidth = 3;
  std::vector<ResultRecord> rows;
  for (int32_t k : {0, 1, 3, 3}) {
    ResultRecord r = ok_row(static_cast<int64_t>(rows.size()));
    r.tokens = {7, 8};
    r.logprobs = {-0.5f, -1.25f};
    r.top_logprobs = k;
    for (int32_t t = 0; t < 2; ++t)
      for (int32_t j = 0; j < k; ++j) {
        r.top_ids.push_back(10 * t + j);
        r.top_values.push_back(-0.125f * static_cast<float>(t + j + 1));
      }
    rows.push_back(r);
  }
  rows.back().tokens.clear();  // a row that asked but generated nothing
  rows.back().logprobs.clear();
  rows.back().top_ids.clear();
  rows.back().top_values.clear();
  {
    ResultsFile file(path, ResultsFile::Mode::Create, kWidth);
    for (const auto& r : rows) file.append(r);
  }
  const FinishedResults back = read_finished(path);
  ASSERT_EQ(back.rows.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    expect_same(back.rows[i], rows[i]);
    EXPECT_EQ(back.rows[i].top_logprobs, rows[i].top_logprobs);
    EXPECT_EQ(back.rows[i].top_ids, rows[i].top_ids);
    EXPECT_EQ(back.rows[i].top_values, rows[i].top_values);  // exact: float32 stored as float32
  }
  // A resumed file keeps its width: another row appended there reads back the same way.
  {
    ResultsFile file(path, ResultsFile::Mode::Resume);
    file.append(rows[1]);
  }
  const FinishedResults again = read_finished(path);
  ASSERT_EQ(again.rows.size(), rows.size() + 1);
  EXPECT_EQ(again.rows.back().top_ids, rows[1].top_ids);
  EXPECT_EQ(again.rows.back().top_values, rows[1].top_values);
}

// Prompt log-probs: k -1 (none carried), 0 (the tokens' own log-probs only) and k > 0 at the file's prompt
// width, the first prompt token's markers (NaN, -1) and every value exact after the round trip.
TEST(IoHdf5Results, PromptLogprobsRoundTripAtTheirOwnWidth) {
  const std::string path = glacier::testing::scratch_dir("io_h5_prompt_top") + "/results.h5";
  constexpr int32_t kTopWidth = 1, kPromptWidth = 4;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<ResultRecord> rows;
  for (int32_t k : {-1, 0, 2, 4}) {
    ResultRecord r = ok_row(static_cast<int64_t>(rows.size()));
    r.prompt_tokens = {1, 5, 9};
    r.prompt_logprobs = k;
    if (k >= 0) {
      r.prompt_logprob_values = {nan, -0.75f, -2.5f};
      r.prompt_top_ids.assign(static_cast<size_t>(k), kNoTokenId);
      r.prompt_top_values.assign(static_cast<size_t>(k), nan);
      for (int32_t t = 1; t < 3; ++t)
        for (int32_t j = 0; j < k; ++j) {
          r.prompt_top_ids.push_back(20 * t + j);
          r.prompt_top_values.push_back(-0.25f * static_cast<float>(t + j));
        }
    }
    rows.push_back(r);
  }
  {
    ResultsFile file(path, ResultsFile::Mode::Create, kTopWidth, kPromptWidth);
    for (const auto& r : rows) file.append(r);
  }
  const FinishedResults back = read_finished(path);
  ASSERT_EQ(back.rows.size(), rows.size());
  // NaN != NaN: compare the float lists bit for bit.
  const auto bits = [](const std::vector<float>& v) {
    std::vector<uint32_t> out(v.size());
    if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * sizeof(float));  // an empty vector's data() may be null
    return out;
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    EXPECT_EQ(back.rows[i].prompt_logprobs, rows[i].prompt_logprobs);
    EXPECT_EQ(bits(back.rows[i].prompt_logprob_values), bits(rows[i].prompt_logprob_values));
    EXPECT_EQ(back.rows[i].prompt_top_ids, rows[i].prompt_top_ids);
    EXPECT_EQ(bits(back.rows[i].prompt_top_values), bits(rows[i].prompt_top_values));
  }
}

}  // namespace
}  // namespace glacier::io
