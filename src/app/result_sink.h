// Rank 0's output side of a job: every result goes to the JSONL file (in input order, OpenAI batch
// output lines for OpenAI batch input) and the HDF5 results file (flushed every N results or T seconds),
// with the run's provenance; --resume reads what an interrupted run finished and refuses a mismatch.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/options.h"
#include "app/sha256.h"
#include "io/hdf5_results.h"
#include "io/jsonl_writer.h"
#include "io/prompt_record.h"
#include "io/result_record.h"

namespace glacier::app {

// What produced a results file; stored as root attributes of the HDF5 file.
struct Provenance {
  std::string model_path;
  uint64_t model_bytes = 0;
  std::string model_sha256;
  std::string tensor_types;  // "f32:11,q8_0:32"
  std::string layer_split;   // "0:3,3:5"
  int32_t ranks = 1;
  std::string hosts;
  std::string options;       // describe_options(): the options that change results
  std::string version;
  std::string mode;
};

// Free bytes on the file system holding `path`, nullopt when unknown (the check is then skipped).
using FreeSpaceProbe = std::function<std::optional<uint64_t>(const std::string& path)>;
std::optional<uint64_t> statvfs_free_space(const std::string& path);

class ResultSink {
 public:
  // Room left on the disk beyond what a flush's rows need: HDF5 also allocates chunks (up to ~200 KB
  // per flush), heap collections and metadata.
  static constexpr uint64_t kSpaceMargin = uint64_t{8} << 20;

  // Before any model is loaded: every output path can be written; with --resume, --out exists and is
  // a glacier results file. Throws InputError naming the option and the path.
  static void check_outputs(const JobOptions& o);

  // Without --resume, creates (replaces) both outputs. With --resume nothing is opened until resume(),
  // so a refused resume leaves the earlier outputs untouched. `records` must outlive the sink.
  ResultSink(const JobOptions& o, const Provenance& p, const std::vector<io::PromptRecord>& records);
  ~ResultSink();
  ResultSink(const ResultSink&) = delete;
  ResultSink& operator=(const ResultSink&) = delete;

  // --resume only, before the first put(): reads --out, throws InputError when model_sha256, mode or
  // options differ from this run's. Returns, per input index, whether an earlier run finished it (a row
  // whose id matches that record; ok and error rows both count). Those rows are written to the JSONL
  // again, so a resumed run's JSONL is complete and in input order.
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

  // Prompts finished so far, including those an earlier run finished.
  int64_t done() const { return done_; }

  // Tests simulate a full disk with this; the default asks statvfs.
  void set_free_space_probe(FreeSpaceProbe probe) { free_space_ = std::move(probe); }

 private:
  void open_outputs(bool resuming);
  void write_provenance(int64_t resumes);
  void write_jsonl(const io::ResultRecord& r);
  void flush();
  void check_space() const;
  [[noreturn]] void fail_h5(const std::string& message);

  JobOptions options_;
  Provenance provenance_;
  const std::vector<io::PromptRecord>& records_;
  std::unique_ptr<io::ResultsFile> h5_;
  std::unique_ptr<io::OrderedLineWriter> jsonl_;
  bool opened_ = false;
  bool finished_ = false;
  int64_t done_ = 0;
  std::vector<io::ResultRecord> pending_;  // rows for the next HDF5 flush, kept out of the file until then
  double last_flush_;                      // now_seconds() of the last HDF5 flush
  std::string h5_error_;                   // the first HDF5 write error; the file takes no more rows
  FreeSpaceProbe free_space_ = statvfs_free_space;
};

}  // namespace glacier::app
