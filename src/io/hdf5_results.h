// The HDF5 results file, written by world rank 0 only: /results holds one extensible column per
// ResultRecord field (h5py/pandas read them directly), root attributes hold the run's provenance.
// Rows reach disk at flush(); a job killed later still leaves a readable file with every flushed row.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/attribute_value.h"
#include "io/result_record.h"

namespace glacier::io {

// Throws InputError when `path` could not be created: missing directory, not writable, a directory.
void check_writable(const std::string& path);

class ResultsFile {
 public:
  enum class Mode {
    Create,  // a new file; an existing one is replaced
    Resume,  // append to an existing results file (rows already there stay)
  };

  // Throws InputError naming the path when the file cannot be created or opened. A new file's
  // top_logprob columns are top_logprobs_width wide, the prompt_top_logprob ones prompt_logprobs_width: no
  // row may ask for more (a resumed file keeps its own).
  ResultsFile(const std::string& path, Mode mode, int32_t top_logprobs_width = 0, int32_t prompt_logprobs_width = 0);
  ~ResultsFile();  // flushes and closes; errors there are logged, call close() to see them
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  void set_attribute(const std::string& name, const AttributeValue& value);
  // Buffers a row; it reaches the file at the next flush() (or sooner when the buffer is large).
  void append(const ResultRecord& result);
  // Writes buffered rows and flushes the file to disk. Throws std::runtime_error naming the path.
  void flush();
  void close();
  // Flushes, then renames the file to `final_path` (same file system), atomically replacing what was
  // there: a file built under a temporary name takes the place of the old one only once it is valid.
  void move_to(const std::string& final_path);

  const std::string& path() const { return path_; }
  int64_t rows_written() const { return rows_written_; }
  size_t rows_buffered() const { return buffer_.size(); }

 private:
  struct Columns;
  void write_buffer();

  std::string path_;
  std::unique_ptr<Columns> columns_;  // HDF5 handles; hidden so that this header needs no hdf5.h
  int64_t rows_written_ = 0;
  std::vector<ResultRecord> buffer_;
};

struct FinishedResults {
  std::vector<ResultRecord> rows;  // in file order
  std::map<std::string, AttributeValue> attributes;
};

// Reads a results file (for --resume): every complete row and the root attributes, so the caller can
// check that the model and options match. Throws InputError naming the path when it is missing or
// not a glacier results file.
FinishedResults read_finished(const std::string& path);

// The root attributes alone (the run's provenance: layer_split, ranks, ...), for a job that reads an
// earlier run's trace. Throws InputError naming the path when it is missing or not an HDF5 file.
std::map<std::string, AttributeValue> read_root_attributes(const std::string& path);

}  // namespace glacier::io
