// ResultsFile: one extensible chunked dataset per ResultRecord field under /results, appended in
// batches; read_finished reads the complete rows back for --resume.
#include "io/hdf5_results.h"

#include <hdf5.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <variant>

#include "io/hdf5_util.h"
#include "io/utf8.h"
#include "util/error.h"
#include "util/log.h"

namespace glacier::io {
namespace {

using h5::check;
using h5::check_status;
using h5::Handle;

// String columns hold valid UTF-8 (replace_invalid_utf8_and_nul: the JSONL rule, NUL too since an
// HDF5 string ends there); RawBytes holds a string field's exact bytes as variable-length uint8 when
// they differ from that repaired form, and is empty otherwise.
// ScoreSum is sum_logprob, NaN on disk for rows that are not scores; ScoreFlag is greedy as int8
// (-1 not a score, 0 false, 1 true), so the "score" flag survives the round trip.
// TopIds and TopValues hold a row's top_logprobs alternatives at the file's fixed width W (attribute
// "width" of both datasets): [tokens x W] row-major, the row's own k first in each token's W, the rest
// kNoTopId / NaN; empty for a row that asked for none (Int32 column top_logprobs = 0). PromptTopIds and
// PromptTopValues hold prompt_top_ids / _values the same way over the prompt's tokens, at their own width
// (the first token's W entries are markers); empty when prompt_logprobs <= 0.
enum class Kind {
  String, Int64, Int32, Float64, ScoreSum, ScoreFlag, Int32List, Float32List, RawBytes, TopIds, TopValues,
  PromptTopIds, PromptTopValues
};
using Field = std::variant<std::string ResultRecord::*, int64_t ResultRecord::*, int32_t ResultRecord::*,
                           double ResultRecord::*, std::vector<int32_t> ResultRecord::*,
                           std::vector<float> ResultRecord::*, std::monostate>;
struct ColumnSpec {
  const char* name;
  Kind kind;
  Field field;
};
const ColumnSpec kColumns[] = {
    {"id", Kind::String, &ResultRecord::id},
    {"index", Kind::Int64, &ResultRecord::index},
    {"sample", Kind::Int64, &ResultRecord::sample},
    {"status", Kind::String, &ResultRecord::status},
    {"error", Kind::String, &ResultRecord::error},
    {"prompt_tokens", Kind::Int32List, &ResultRecord::prompt_tokens},
    {"tokens", Kind::Int32List, &ResultRecord::tokens},
    {"text", Kind::String, &ResultRecord::text},
    {"logprobs", Kind::Float32List, &ResultRecord::logprobs},
    {"top_logprobs", Kind::Int32, &ResultRecord::top_logprobs},
    {"top_logprob_ids", Kind::TopIds, std::monostate{}},
    {"top_logprob_values", Kind::TopValues, std::monostate{}},
    {"prompt_logprobs", Kind::Int32, &ResultRecord::prompt_logprobs},
    {"prompt_logprob_values", Kind::Float32List, &ResultRecord::prompt_logprob_values},
    {"prompt_top_logprob_ids", Kind::PromptTopIds, std::monostate{}},
    {"prompt_top_logprob_values", Kind::PromptTopValues, std::monostate{}},
    {"finish_reason", Kind::String, &ResultRecord::finish_reason},
    {"time_to_first_token", Kind::Float64, &ResultRecord::time_to_first_token_s},
    {"total_time", Kind::Float64, &ResultRecord::total_time_s},
    {"sum_logprob", Kind::ScoreSum, &ResultRecord::sum_logprob},
    {"greedy", Kind::ScoreFlag, std::monostate{}},
    {"text_bytes", Kind::RawBytes, &ResultRecord::text},
    {"prompt_digest", Kind::String, &ResultRecord::prompt_digest},
    {"sampling", Kind::String, &ResultRecord::sampling},
};
constexpr size_t kColumnCount = std::size(kColumns);
constexpr hsize_t kChunkRows = 1024;          // rows per chunk: a few KB to tens of KB per column chunk
constexpr size_t kMaxBufferedRows = 4096;     // bounds memory between the caller's flushes
// 2: string columns repaired to valid UTF-8, text_bytes, and the prompt_digest and sampling columns
// (a format-1 file cannot tell which prompt a row answered, so it is not read back).
// 3: top_logprobs, top_logprob_ids and top_logprob_values (fixed width), "top_logprobs" in the sampling
// column, and the sample column (n samples a prompt, one row each); a format-2 file has no place for a
// row's alternatives and no sample to match rows by, so it is not read back.
// 4: prompt_logprobs, prompt_logprob_values, prompt_top_logprob_ids and _values (vLLM's prompt_logprobs);
// a format-3 file has no place for them.
constexpr int64_t kFormatVersion = 4;
constexpr const char* kFormatAttribute = "glacier_results_format";
constexpr const char* kWidthAttribute = "width";
constexpr int8_t kGreedyNotScored = -1;
constexpr int32_t kNoTopId = kNoTokenId;  // top_logprob_ids past a row's own k

// The HDF5 element types a column is built from: little-endian ones in the file, native ones in memory.
struct ElementTypes {
  hid_t i64, i32, f64, i8, f32, u8;
};

Handle column_type(Kind kind, const ElementTypes& e) {
  switch (kind) {
    case Kind::String: return h5::vlen_string_type();
    case Kind::Int64: return Handle(check(H5Tcopy(e.i64), "H5Tcopy"), H5Tclose);
    case Kind::Int32: return Handle(check(H5Tcopy(e.i32), "H5Tcopy"), H5Tclose);
    case Kind::Float64:
    case Kind::ScoreSum: return Handle(check(H5Tcopy(e.f64), "H5Tcopy"), H5Tclose);
    case Kind::ScoreFlag: return Handle(check(H5Tcopy(e.i8), "H5Tcopy"), H5Tclose);
    case Kind::Int32List:
    case Kind::TopIds:
    case Kind::PromptTopIds: return Handle(check(H5Tvlen_create(e.i32), "H5Tvlen_create"), H5Tclose);
    case Kind::Float32List:
    case Kind::TopValues:
    case Kind::PromptTopValues: return Handle(check(H5Tvlen_create(e.f32), "H5Tvlen_create"), H5Tclose);
    case Kind::RawBytes: return Handle(check(H5Tvlen_create(e.u8), "H5Tvlen_create"), H5Tclose);
  }
  GLACIER_ASSERT(false, "unknown column kind");
}

Handle file_type(Kind kind) {
  return column_type(kind, {H5T_STD_I64LE, H5T_STD_I32LE, H5T_IEEE_F64LE, H5T_STD_I8LE, H5T_IEEE_F32LE, H5T_STD_U8LE});
}

Handle memory_type(Kind kind) {
  return column_type(kind, {H5T_NATIVE_INT64, H5T_NATIVE_INT32, H5T_NATIVE_DOUBLE, H5T_NATIVE_INT8, H5T_NATIVE_FLOAT,
                            H5T_NATIVE_UINT8});
}

Handle create_column(hid_t group, const ColumnSpec& spec, const std::string& path) {
  const hsize_t initial = 0, unlimited = H5S_UNLIMITED;
  Handle space(check(H5Screate_simple(1, &initial, &unlimited), "H5Screate_simple"), H5Sclose);
  Handle dcpl(check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"), H5Pclose);
  check_status(H5Pset_chunk(dcpl.get(), 1, &kChunkRows), "H5Pset_chunk");
  Handle type = file_type(spec.kind);
  return Handle(check(H5Dcreate2(group, spec.name, type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                      path + ": cannot create dataset /results/" + spec.name),
                H5Dclose);
}

// The width of the top-logprob columns, from their "width" attribute.
int32_t top_width(hid_t group, const std::string& path, const std::string& name = "top_logprob_ids") {
  Handle dataset(check(H5Dopen2(group, name.c_str(), H5P_DEFAULT), path + ": cannot open /results/" + name), H5Dclose);
  const auto attributes = h5::read_attributes(dataset.get());
  const auto it = attributes.find(kWidthAttribute);
  const auto* width = it == attributes.end() ? nullptr : std::get_if<int64_t>(&it->second);
  if (!width || *width < 0 || *width > std::numeric_limits<int32_t>::max())
    throw InputError("results file " + path + ": expected an integer attribute " + kWidthAttribute +
                     " >= 0 on /results/" + name + ", found " + (width ? std::to_string(*width) : std::string("none")));
  return static_cast<int32_t>(*width);
}

// Refuses a results file of another format version before its columns are read, naming both versions.
void require_format(hid_t file, const std::string& path) {
  const auto attributes = h5::read_attributes(file);
  const auto it = attributes.find(kFormatAttribute);
  if (it == attributes.end())
    throw InputError("results file " + path + ": expected a root attribute " + kFormatAttribute +
                     " (a file written by glacier_mpi), found none");
  const auto* version = std::get_if<int64_t>(&it->second);
  if (!version || *version != kFormatVersion)
    throw InputError("results file " + path + ": expected results format " + std::to_string(kFormatVersion) +
                     ", found " + (version ? std::to_string(*version) : std::string("a non-integer")) +
                     " (written by another glacier version; run it again into a new --out file)");
}

hsize_t column_length(hid_t dataset) {
  Handle space(check(H5Dget_space(dataset), "H5Dget_space"), H5Sclose);
  hsize_t n = 0;
  check(H5Sget_simple_extent_dims(space.get(), &n, nullptr), "H5Sget_simple_extent_dims");
  return n;
}

// Opens every column of /results; throws InputError when one is missing. Returns the length of the
// shortest column: rows past it belong to a flush that a killed job did not finish.
hsize_t open_columns(hid_t group, const std::string& path, std::vector<Handle>& datasets) {
  hsize_t rows = std::numeric_limits<hsize_t>::max();
  for (const auto& spec : kColumns) {
    if (!h5::link_exists(group, spec.name))
      throw InputError(path + ": expected a glacier results file with dataset /results/" + spec.name +
                       ", found none");
    datasets.emplace_back(check(H5Dopen2(group, spec.name, H5P_DEFAULT), path + ": cannot open /results/" + spec.name),
                          H5Dclose);
    rows = std::min(rows, column_length(datasets.back().get()));
  }
  return rows;
}

// Whether a string field's HDF5 form (valid UTF-8 without NUL) differs from its bytes.
bool needs_repair(const std::string& text) {
  return find_invalid_utf8(text).has_value() || text.find('\0') != std::string::npos;
}

void write_column_rows(hid_t dataset, hid_t mem_type, hsize_t start, hsize_t count, const void* data,
                       const std::string& what) {
  const hsize_t new_size = start + count;
  check_status(H5Dset_extent(dataset, &new_size), what);
  Handle file_space(check(H5Dget_space(dataset), what), H5Sclose);
  check_status(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr), what);
  Handle mem_space(check(H5Screate_simple(1, &count, nullptr), what), H5Sclose);
  check_status(H5Dwrite(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, data), what);
}

template <typename T>
hvl_t as_vlen(const std::vector<T>& values) {
  return hvl_t{values.size(), const_cast<T*>(values.data())};  // HDF5 only reads through p on write
}

template <typename T>
std::vector<T> from_vlen(const hvl_t& v) {
  const T* p = static_cast<const T*>(v.p);
  return p ? std::vector<T>(p, p + v.len) : std::vector<T>();
}

// Gathers one column of `rows` into the memory layout HDF5 expects and hands it to write(data).
// The alternatives of a row's `count` tokens (generated or prompt), k each, spread to the file's width:
// [count x width], `marker` past its own k; empty when k <= 0.
template <typename T>
std::vector<T> widened(int32_t k_asked, size_t count, const std::vector<T>& values, int32_t width, T marker) {
  if (k_asked <= 0) return {};
  GLACIER_ASSERT(k_asked <= width && values.size() == count * static_cast<size_t>(k_asked),
                 "a row's alternatives fit the results file's width");
  const auto k = static_cast<size_t>(k_asked), w = static_cast<size_t>(width);
  std::vector<T> out(count * w, marker);
  for (size_t t = 0; t < count; ++t) std::copy_n(values.begin() + t * k, k, out.begin() + t * w);
  return out;
}

// The inverse of widened(): the row's own k of each token's width. `what` names the columns in messages.
template <typename T>
std::vector<T> narrowed(const ResultRecord& r, int32_t k_asked, size_t count, const std::vector<T>& stored, int32_t width,
                        const std::string& path, const char* what) {
  if (k_asked <= 0 && stored.empty()) return {};
  const auto k = static_cast<size_t>(std::max(k_asked, 0)), w = static_cast<size_t>(width);
  if (k_asked <= 0 || k > w || stored.size() != count * w)
    throw InputError("results file " + path + ": row " + std::to_string(r.index) + " has " + std::to_string(stored.size()) +
                     " " + what + " entries, expected tokens x width = " + std::to_string(count) + " x " +
                     std::to_string(width) + " with k " + std::to_string(k_asked) + " in 1..width");
  std::vector<T> out(count * k);
  for (size_t t = 0; t < count; ++t) std::copy_n(stored.begin() + t * w, k, out.begin() + t * k);
  return out;
}

// The widths of the fixed-width columns: generated tokens' alternatives and prompt tokens'.
struct Widths {
  int32_t top = 0;
  int32_t prompt_top = 0;
};

Widths read_widths(hid_t group, const std::string& path) {
  return {top_width(group, path), top_width(group, path, "prompt_top_logprob_ids")};
}

// Writes each row's field of a number column as it is.
template <typename T, typename Write>
void write_numbers(const ColumnSpec& spec, const std::vector<ResultRecord>& rows, Write& write) {
  auto field = std::get<T ResultRecord::*>(spec.field);
  std::vector<T> values;
  for (const auto& r : rows) values.push_back(r.*field);
  write(values.data());
}

// Writes each row's field of a list column as variable-length data pointing into the rows.
template <typename T, typename Write>
void write_lists(const ColumnSpec& spec, const std::vector<ResultRecord>& rows, Write& write) {
  auto field = std::get<std::vector<T> ResultRecord::*>(spec.field);
  std::vector<hvl_t> values;
  for (const auto& r : rows) values.push_back(as_vlen(r.*field));
  write(values.data());
}

template <typename Write>
void write_column(const ColumnSpec& spec, const std::vector<ResultRecord>& rows, Widths width, Write&& write) {
  switch (spec.kind) {
    case Kind::Int32: return write_numbers<int32_t>(spec, rows, write);
    case Kind::TopIds:
    case Kind::TopValues:
    case Kind::PromptTopIds:
    case Kind::PromptTopValues: {
      std::vector<std::vector<int32_t>> ids;
      std::vector<std::vector<float>> logprobs;
      std::vector<hvl_t> values;
      ids.reserve(rows.size());  // as_vlen keeps pointers into these
      logprobs.reserve(rows.size());
      constexpr float kNoValue = std::numeric_limits<float>::quiet_NaN();
      for (const auto& r : rows) {
        if (spec.kind == Kind::TopIds) {
          ids.push_back(widened(r.top_logprobs, r.tokens.size(), r.top_ids, width.top, kNoTopId));
          values.push_back(as_vlen(ids.back()));
        } else if (spec.kind == Kind::TopValues) {
          logprobs.push_back(widened(r.top_logprobs, r.tokens.size(), r.top_values, width.top, kNoValue));
          values.push_back(as_vlen(logprobs.back()));
        } else if (spec.kind == Kind::PromptTopIds) {
          ids.push_back(widened(r.prompt_logprobs, r.prompt_tokens.size(), r.prompt_top_ids, width.prompt_top, kNoTopId));
          values.push_back(as_vlen(ids.back()));
        } else {
          logprobs.push_back(
              widened(r.prompt_logprobs, r.prompt_tokens.size(), r.prompt_top_values, width.prompt_top, kNoValue));
          values.push_back(as_vlen(logprobs.back()));
        }
      }
      return write(values.data());
    }
    case Kind::String: {
      auto field = std::get<std::string ResultRecord::*>(spec.field);
      std::vector<std::string> repaired;  // only the strings that need it; the rest are written in place
      repaired.reserve(rows.size());
      std::vector<const char*> values;
      for (const auto& r : rows) {
        const std::string& text = r.*field;
        if (needs_repair(text)) {
          repaired.push_back(replace_invalid_utf8_and_nul(text));
          values.push_back(repaired.back().c_str());
        } else {
          values.push_back(text.c_str());
        }
      }
      return write(values.data());
    }
    case Kind::Int64: return write_numbers<int64_t>(spec, rows, write);
    case Kind::Float64:
    case Kind::ScoreSum: {
      auto field = std::get<double ResultRecord::*>(spec.field);
      const bool score_only = spec.kind == Kind::ScoreSum;
      std::vector<double> values;
      for (const auto& r : rows)
        values.push_back(score_only && !r.score ? std::numeric_limits<double>::quiet_NaN() : r.*field);
      return write(values.data());
    }
    case Kind::ScoreFlag: {
      std::vector<int8_t> values;
      for (const auto& r : rows) values.push_back(r.score ? static_cast<int8_t>(r.greedy) : kGreedyNotScored);
      return write(values.data());
    }
    case Kind::Int32List: return write_lists<int32_t>(spec, rows, write);
    case Kind::Float32List: return write_lists<float>(spec, rows, write);
    case Kind::RawBytes: {
      auto field = std::get<std::string ResultRecord::*>(spec.field);
      std::vector<hvl_t> values;
      for (const auto& r : rows) {
        const std::string& text = r.*field;
        values.push_back(needs_repair(text) ? hvl_t{text.size(), const_cast<char*>(text.data())} : hvl_t{0, nullptr});
      }
      return write(values.data());
    }
  }
}

// Reads a number column into each row's field.
template <typename T, typename Read>
void read_numbers(const ColumnSpec& spec, std::vector<ResultRecord>& rows, Read& read) {
  auto field = std::get<T ResultRecord::*>(spec.field);
  std::vector<T> values(rows.size());
  read(values.data());
  for (size_t i = 0; i < rows.size(); ++i) rows[i].*field = values[i];
}

// Reads a list column into each row's field, then frees what HDF5 allocated for it.
template <typename T, typename Read, typename Reclaim>
void read_lists(const ColumnSpec& spec, std::vector<ResultRecord>& rows, Read& read, Reclaim& reclaim) {
  auto field = std::get<std::vector<T> ResultRecord::*>(spec.field);
  std::vector<hvl_t> values(rows.size());
  read(values.data());
  for (size_t i = 0; i < rows.size(); ++i) rows[i].*field = from_vlen<T>(values[i]);
  reclaim(values.data());
}

// Reads one column into `rows` (already sized); read(buffer) fills buffer, reclaim(buffer) frees
// what HDF5 allocated for variable-length data.
template <typename Read, typename Reclaim>
void read_column(const ColumnSpec& spec, std::vector<ResultRecord>& rows, Widths width, const std::string& path,
                 Read&& read, Reclaim&& reclaim) {
  const size_t n = rows.size();
  switch (spec.kind) {
    case Kind::Int32: return read_numbers<int32_t>(spec, rows, read);
    case Kind::TopIds:
    case Kind::TopValues:
    case Kind::PromptTopIds:
    case Kind::PromptTopValues: {  // after the token lists and k columns, which say how to narrow them
      std::vector<hvl_t> values(n);
      read(values.data());
      try {
        for (size_t i = 0; i < n; ++i) {
          ResultRecord& r = rows[i];
          if (spec.kind == Kind::TopIds)
            r.top_ids = narrowed(r, r.top_logprobs, r.tokens.size(), from_vlen<int32_t>(values[i]), width.top, path, "top-logprob");
          else if (spec.kind == Kind::TopValues)
            r.top_values = narrowed(r, r.top_logprobs, r.tokens.size(), from_vlen<float>(values[i]), width.top, path, "top-logprob");
          else if (spec.kind == Kind::PromptTopIds)
            r.prompt_top_ids = narrowed(r, r.prompt_logprobs, r.prompt_tokens.size(), from_vlen<int32_t>(values[i]),
                                        width.prompt_top, path, "prompt top-logprob");
          else
            r.prompt_top_values = narrowed(r, r.prompt_logprobs, r.prompt_tokens.size(), from_vlen<float>(values[i]),
                                           width.prompt_top, path, "prompt top-logprob");
        }
      } catch (...) {
        reclaim(values.data());
        throw;
      }
      return reclaim(values.data());
    }
    case Kind::String: {
      auto field = std::get<std::string ResultRecord::*>(spec.field);
      std::vector<char*> values(n, nullptr);
      read(values.data());
      for (size_t i = 0; i < n; ++i) rows[i].*field = values[i] ? values[i] : "";
      return reclaim(values.data());
    }
    case Kind::Int64: return read_numbers<int64_t>(spec, rows, read);
    case Kind::Float64:
    case Kind::ScoreSum: {
      auto field = std::get<double ResultRecord::*>(spec.field);
      std::vector<double> values(n);
      read(values.data());
      for (size_t i = 0; i < n; ++i) rows[i].*field = std::isnan(values[i]) && spec.kind == Kind::ScoreSum ? 0 : values[i];
      return;
    }
    case Kind::ScoreFlag: {
      std::vector<int8_t> values(n);
      read(values.data());
      for (size_t i = 0; i < n; ++i) {
        rows[i].score = values[i] != kGreedyNotScored;
        rows[i].greedy = values[i] > 0;
      }
      return;
    }
    case Kind::Int32List: return read_lists<int32_t>(spec, rows, read, reclaim);
    case Kind::Float32List: return read_lists<float>(spec, rows, read, reclaim);
    case Kind::RawBytes: {  // read after the string column it keeps exact: the bytes replace its repaired form
      auto field = std::get<std::string ResultRecord::*>(spec.field);
      std::vector<hvl_t> values(n);
      read(values.data());
      for (size_t i = 0; i < n; ++i)
        if (values[i].len > 0) rows[i].*field = std::string(static_cast<const char*>(values[i].p), values[i].len);
      return reclaim(values.data());
    }
  }
}

}  // namespace

struct ResultsFile::Columns {
  Widths widths;
  Handle file;
  Handle group;
  std::vector<Handle> datasets;  // in kColumns order
  std::vector<Handle> memory_types;
};

void check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  if (fs::is_directory(target, ec))
    throw InputError("output file " + path + ": expected a file name, found a directory");
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec))
    throw InputError("output file " + path + ": expected an existing directory " + dir.string() + ", found none");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw InputError("output file " + path + ": directory " + dir.string() + " is not writable (" +
                     std::strerror(errno) + ")");
  if (fs::exists(target, ec) && ::access(path.c_str(), W_OK) != 0)
    throw InputError("output file " + path + ": exists and is not writable (" + std::strerror(errno) + ")");
}

ResultsFile::ResultsFile(const std::string& path, Mode mode, int32_t top_logprobs_width, int32_t prompt_logprobs_width)
    : path_(path), columns_(std::make_unique<Columns>()) {
  h5::silence_errors();
  Columns& c = *columns_;
  c.widths = {top_logprobs_width, prompt_logprobs_width};
  if (mode == Mode::Create) {
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) throw InputError("cannot create results file " + path + h5::error_detail());
    c.file = Handle(file, H5Fclose);
  } else {
    if (!std::filesystem::exists(path))
      throw InputError("cannot resume from results file " + path + ": expected an existing file, found none");
    hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    if (file < 0) throw InputError("cannot open results file " + path + " for resuming" + h5::error_detail());
    c.file = Handle(file, H5Fclose);
  }
  if (mode == Mode::Resume) require_format(c.file.get(), path);
  if (mode == Mode::Resume && h5::link_exists(c.file.get(), "results")) {
    c.group = Handle(check(H5Gopen2(c.file.get(), "results", H5P_DEFAULT), path + ": cannot open /results"), H5Gclose);
    hsize_t rows = open_columns(c.group.get(), path, c.datasets);
    for (auto& d : c.datasets)  // drop the rows of an unfinished flush so all columns agree
      check_status(H5Dset_extent(d.get(), &rows), path + ": cannot trim /results to " + std::to_string(rows) + " rows");
    rows_written_ = static_cast<int64_t>(rows);
    c.widths = read_widths(c.group.get(), path);
  } else {
    c.group = Handle(check(H5Gcreate2(c.file.get(), "results", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                           path + ": cannot create group /results"),
                     H5Gclose);
    for (const auto& spec : kColumns) {
      c.datasets.push_back(create_column(c.group.get(), spec, path));
      if (spec.kind == Kind::TopIds || spec.kind == Kind::TopValues)
        h5::write_attribute(c.datasets.back().get(), kWidthAttribute, static_cast<int64_t>(c.widths.top));
      if (spec.kind == Kind::PromptTopIds || spec.kind == Kind::PromptTopValues)
        h5::write_attribute(c.datasets.back().get(), kWidthAttribute, static_cast<int64_t>(c.widths.prompt_top));
    }
    set_attribute(kFormatAttribute, kFormatVersion);
  }
  for (const auto& spec : kColumns) c.memory_types.push_back(memory_type(spec.kind));
}

ResultsFile::~ResultsFile() {
  try {
    close();
  } catch (const std::exception& e) {
    GLACIER_LOG_ERROR("%s", e.what());
  }
}

void ResultsFile::set_attribute(const std::string& name, const AttributeValue& value) {
  GLACIER_ASSERT(columns_->file.valid(), "results file used after close");
  try {
    h5::write_attribute(columns_->file.get(), name, value);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path_ + ": " + e.what());
  }
}

void ResultsFile::append(const ResultRecord& result) {
  GLACIER_ASSERT(columns_->file.valid(), "results file used after close");
  buffer_.push_back(result);
  if (buffer_.size() >= kMaxBufferedRows) write_buffer();
}

void ResultsFile::write_buffer() {
  if (buffer_.empty()) return;
  const auto start = static_cast<hsize_t>(rows_written_);
  for (size_t c = 0; c < kColumnCount; ++c) {
    const ColumnSpec& spec = kColumns[c];
    auto write = [&](const void* data) {
      write_column_rows(columns_->datasets[c].get(), columns_->memory_types[c].get(), start, buffer_.size(), data,
                        "cannot write results to " + path_ + " (/results/" + spec.name + ")");
    };
    write_column(spec, buffer_, columns_->widths, write);
  }
  rows_written_ += static_cast<int64_t>(buffer_.size());
  buffer_.clear();
}

void ResultsFile::flush() {
  GLACIER_ASSERT(columns_->file.valid(), "results file used after close");
  write_buffer();
  check_status(H5Fflush(columns_->file.get(), H5F_SCOPE_GLOBAL), "cannot flush results file " + path_);
}

void ResultsFile::move_to(const std::string& final_path) {
  flush();
  std::error_code ec;
  std::filesystem::rename(path_, final_path, ec);
  if (ec) throw std::runtime_error("cannot move results file " + path_ + " into place as " + final_path + ": " + ec.message());
  path_ = final_path;
}

void ResultsFile::close() {
  if (!columns_->file.valid()) return;
  Columns& c = *columns_;
  try {
    write_buffer();
  } catch (...) {
    buffer_.clear();  // the rows are lost either way; do not retry them in the destructor
    c.datasets.clear();
    c.group.reset();
    c.file.reset();
    throw;
  }
  c.datasets.clear();
  c.memory_types.clear();
  c.group.reset();
  if (!c.file.reset()) throw std::runtime_error("cannot close results file " + path_ + h5::error_detail());
}

std::map<std::string, AttributeValue> read_root_attributes(const std::string& path) {
  Handle file = h5::open_for_reading(path, "results file");
  return h5::read_attributes(file.get());
}

FinishedResults read_finished(const std::string& path) {
  Handle file = h5::open_for_reading(path, "results file");
  require_format(file.get(), path);
  if (!h5::link_exists(file.get(), "results"))
    throw InputError("results file " + path + ": expected a group /results, found none");
  Handle group(check(H5Gopen2(file.get(), "results", H5P_DEFAULT), path + ": cannot open /results"), H5Gclose);
  std::vector<Handle> datasets;
  const hsize_t n = open_columns(group.get(), path, datasets);
  const Widths width = read_widths(group.get(), path);

  FinishedResults out;
  out.attributes = h5::read_attributes(file.get());
  out.rows.resize(n);
  if (n == 0) return out;
  const hsize_t start = 0;
  Handle mem_space(check(H5Screate_simple(1, &n, nullptr), "H5Screate_simple"), H5Sclose);
  for (size_t c = 0; c < kColumnCount; ++c) {
    const std::string what = "cannot read " + path + " /results/" + kColumns[c].name;
    Handle file_space(check(H5Dget_space(datasets[c].get()), what), H5Sclose);
    check_status(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr), what);
    Handle type = memory_type(kColumns[c].kind);
    auto read = [&](void* buffer) {
      check_status(H5Dread(datasets[c].get(), type.get(), mem_space.get(), file_space.get(), H5P_DEFAULT, buffer), what);
    };
    auto reclaim = [&](void* buffer) { H5Dvlen_reclaim(type.get(), mem_space.get(), H5P_DEFAULT, buffer); };
    read_column(kColumns[c], out.rows, width, path, read, reclaim);
  }
  return out;
}

}  // namespace glacier::io
