// Rank 0's output side of a job: every result goes to the JSONL file (in input order, OpenAI batch
// output lines for OpenAI batch input) and the HDF5 results file (flushed every N results or T seconds),
// with the run's provenance; --resume keeps only rows that answer today's prompts under today's settings.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/options.h"
#include "app/provenance.h"
#include "io/hdf5_results.h"
#include "io/jsonl_writer.h"
#include "io/prompt_record.h"
#include "io/result_record.h"

namespace glacier::app {

// Free bytes on the file system holding `path`, nullopt when unknown (the check is then skipped).
using FreeSpaceProbe = std::function<std::optional<uint64_t>(const std::string& path)>;
std::optional<uint64_t> statvfs_free_space(const std::string& path);

class ResultSink {
 public:
  // Room left on the disk beyond what a flush's rows need: HDF5 may allocate a new chunk for each
  // column (16 vlen references or 8-byte values times 1024 rows: at most 16 KiB a column), a global heap
  // collection (4 KiB at least) and metadata; measured, a flush of a few rows grows a file by under 200
  // KiB. One MiB keeps a safe factor without calling a small volume full that holds the whole output.
  static constexpr uint64_t kSpaceMargin = uint64_t{1} << 20;

  // Before any model is loaded: no output names an input or the other output, every output path can
  // be written; with --resume, --out exists and is a glacier results file of this format. Throws
  // InputError naming the option and the path.
  static void check_outputs(const JobOptions& o);

  // Without --resume, builds a new HDF5 file under a temporary name and moves it over --out once it
  // holds the provenance (an existing file is replaced only by a valid one), and rewrites the JSONL.
  // With --resume nothing is opened until resume(), so a refused resume leaves the earlier outputs
  // untouched. The caller holds the outputs' locks (output_guard.h). `records` must outlive the sink.
  ResultSink(const JobOptions& o, const Provenance& p, const std::vector<io::PromptRecord>& records);
  ~ResultSink();
  ResultSink(const ResultSink&) = delete;
  ResultSink& operator=(const ResultSink&) = delete;

  // --resume only, before the first put(): reads --out and throws InputError when the model or a
  // result-changing setting differs from this run's, naming it. A row is (index, id, prompt digest,
  // sample); a prompt's rows are kept only when the prompt now at their index has the same id and prompt
  // digest (the line and its sampling) and a row exists for each of its n samples; the others run again,
  // every sample. The kept rows (the first of any repeats) go into a new file that replaces --out, so
  // /results never holds two rows for one sample nor a row for a prompt that changed. Returns, per input
  // index, whether kept rows finished it (ok and error rows both count); those rows are written to the
  // JSONL again, so a resumed run's JSONL is complete and in input order.
  std::vector<bool> resume();

  // Throws std::runtime_error naming the path on a write error. A flush first checks the free space
  // and refuses (same error) without touching the file when the rows might not fit: HDF5 rewrites
  // metadata in place, so a write that fails half-way can make earlier rows unreadable. After an
  // HDF5 error every later put() and finish() throws it again.
  void put(const io::ResultRecord& r);
  // Flushes buffered HDF5 rows when flush_seconds have passed since the last flush; lets the job keep
  // the on-disk file fresh while no result arrives.
  void tick();
  // Writes everything and closes both files; throws std::runtime_error naming the path. Idempotent.
  void finish();

  // A root attribute of the HDF5 file beside the provenance (a perplexity run's figures, as JSON text).
  void record_attribute(const std::string& name, const std::string& value);

  // Prompts finished so far (every sample's row put), including those an earlier run finished.
  int64_t done() const { return done_; }
  // Rows the prompt at this index gives: its n samples (1 for a line that could not be read).
  size_t rows_of(int64_t index) const { return static_cast<size_t>(samples_[static_cast<size_t>(index)]); }

  // How a token id reads as text, for top_logprobs and OpenAI log-probs (the driver's tokenizer); set
  // before resume() or the first put() of a row that needs it.
  void set_token_text(io::TokenText token_text) { token_text_ = std::move(token_text); }

  // Tests simulate a full disk with this; the default asks statvfs.
  void set_free_space_probe(FreeSpaceProbe probe) { free_space_ = std::move(probe); }

 private:
  // A new HDF5 file under a temporary name beside --out, holding the provenance and `rows`, moved over
  // --out; and the JSONL, rewritten.
  void open_outputs(const std::vector<io::ResultRecord>& rows, nlohmann::json runs, int64_t resumes);
  void write_provenance(int64_t resumes);
  io::ResultRecord with_prompt_facts(const io::ResultRecord& r) const;
  void write_jsonl(const io::ResultRecord& r);
  // The OpenAI batch line facts of `record` (request `index`), answered with n choices per prompt.
  io::OpenAiBatchLine openai_line(const io::PromptRecord& record, int64_t index, int32_t n) const;
  void flush();
  void check_space() const;
  [[noreturn]] void fail_h5(const std::string& message);

  JobOptions options_;
  Provenance provenance_;
  const std::vector<io::PromptRecord>& records_;
  std::vector<std::string> digests_;  // prompt_digest of each record
  std::vector<int32_t> samples_;      // rows each record gives (its n)
  std::vector<int64_t> first_row_;    // each record's first row in the JSONL (rows in input, then sample order)
  // Rows of a `continuations` line or of an OpenAI request with n > 1 until all have come (its JSONL line
  // holds them all).
  std::map<int64_t, std::vector<io::ResultRecord>> grouped_rows_;
  std::vector<int32_t> rows_put_;     // rows put so far, per record
  nlohmann::json runs_;               // every run that wrote this file, this one last
  int64_t created_ = 0;               // OpenAI lines' "created": the first run's start, Unix seconds
  std::unique_ptr<io::ResultsFile> h5_;
  std::unique_ptr<io::OrderedLineWriter> jsonl_;
  bool opened_ = false;
  bool finished_ = false;
  int64_t done_ = 0;
  std::vector<io::ResultRecord> pending_;  // rows for the next HDF5 flush, kept out of the file until then
  double last_flush_;                      // now_seconds() of the last HDF5 flush
  std::string h5_error_;                   // the first HDF5 write error; the file takes no more rows
  FreeSpaceProbe free_space_ = statvfs_free_space;
  io::TokenText token_text_;
  int32_t top_logprobs_width_ = 0;  // the largest top_logprobs any prompt asks for: the HDF5 columns' width
  int32_t prompt_logprobs_width_ = 0;  // the largest prompt_logprobs: the prompt_top_logprob columns' width
};

}  // namespace glacier::app
