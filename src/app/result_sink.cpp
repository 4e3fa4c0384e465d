// ResultSink: output path checks, provenance attributes, the flush policy, and resuming from the
// rows an interrupted run left in its HDF5 file.
#include "app/result_sink.h"

#include <sys/statvfs.h>

#include <exception>
#include <filesystem>
#include <variant>

#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

namespace glacier::app {
namespace {

// Written by io::ResultsFile into every results file it creates.
constexpr const char* kFormatAttribute = "glacier_results_format";
constexpr const char* kResumesAttribute = "resumes";

std::string show_attribute(const io::AttributeValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  return std::to_string(std::get<double>(value));
}

// Multi-line values (the options) read better on one line of an error message.
std::string one_line(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\n') {
      out += "; ";
    } else {
      out.push_back(c);
    }
  }
  while (out.size() >= 3 && out.compare(out.size() - 2, 2, "; ") == 0) out.resize(out.size() - 2);
  out.push_back('\'');
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// The first line that differs, so a long option list points at the culprit.
std::string first_difference(const std::string& then, const std::string& now) {
  const auto a = lines_of(then), b = lines_of(now);
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? a[i] : "(nothing)";
    const std::string y = i < b.size() ? b[i] : "(nothing)";
    if (x != y) return " (first difference: '" + x + "' in the file, '" + y + "' now)";
  }
  return "";
}

void require_same(const io::FinishedResults& file, const std::string& path, const std::string& name,
                  const std::string& now) {
  auto it = file.attributes.find(name);
  const bool present = it != file.attributes.end();
  const std::string then = present ? show_attribute(it->second) : "";
  if (present && then == now) return;
  const std::string shown_then = present ? one_line(then) : "(absent)";
  const std::string hint = present && now.find('\n') != std::string::npos ? first_difference(then, now) : "";
  throw InputError("--resume: cannot resume from " + path + ": attribute " + name + " is " + shown_then +
                   " in the file but " + one_line(now) + " in this run" + hint +
                   "; rerun with the same model and options, or write to a new --out file");
}

void check_path(const char* option, const std::string& path) {
  try {
    io::check_writable(path);
  } catch (const InputError& e) {
    throw InputError(std::string(option) + ": " + e.what());
  }
}

bool same_file(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec_a, ec_b;
  const fs::path pa = fs::weakly_canonical(fs::absolute(a), ec_a);
  const fs::path pb = fs::weakly_canonical(fs::absolute(b), ec_b);
  if (ec_a || ec_b) return fs::absolute(a).lexically_normal() == fs::absolute(b).lexically_normal();
  return pa == pb;
}

// What a row adds to the file, generously: its strings and lists plus a heap id per column.
uint64_t estimated_bytes(const io::ResultRecord& r) {
  constexpr uint64_t kPerRowOverhead = 16 * 16;
  const uint64_t strings = r.id.size() + r.status.size() + r.error.size() + r.text.size() + r.finish_reason.size();
  const uint64_t lists = 4 * (r.prompt_tokens.size() + r.tokens.size() + r.logprobs.size());
  return strings + lists + kPerRowOverhead;
}

}  // namespace

std::optional<uint64_t> statvfs_free_space(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  struct statvfs info;
  if (::statvfs(dir.c_str(), &info) != 0) return std::nullopt;
  return static_cast<uint64_t>(info.f_bavail) * info.f_frsize;
}

void ResultSink::check_outputs(const JobOptions& o) {
  if (o.resume && o.h5_out.empty())
    throw InputError("--resume: expected an --out HDF5 results file to resume from, found no --out");
  if (!o.h5_out.empty() && !o.jsonl_out.empty() && same_file(o.h5_out, o.jsonl_out))
    throw InputError("--out and --jsonl: expected two different files, found both naming " + o.h5_out);
  if (!o.jsonl_out.empty()) check_path("--jsonl", o.jsonl_out);
  if (o.h5_out.empty()) return;
  check_path("--out", o.h5_out);
  if (!o.resume) return;
  io::FinishedResults finished;
  try {
    finished = io::read_finished(o.h5_out);
  } catch (const InputError& e) {
    throw InputError(std::string("--resume: ") + e.what());
  }
  if (!finished.attributes.count(kFormatAttribute))
    throw InputError("--resume: results file " + o.h5_out + ": expected a root attribute " + kFormatAttribute +
                     " (a file written by glacier_mpi), found none");
}

ResultSink::ResultSink(const JobOptions& o, const Provenance& p, const std::vector<io::PromptRecord>& records)
    : options_(o), provenance_(p), records_(records), last_flush_(now_seconds()) {
  if (!o.resume) {
    open_outputs(false);
    write_provenance(0);
  }
}

ResultSink::~ResultSink() = default;

void ResultSink::open_outputs(bool resuming) {
  std::error_code ec;
  if (!resuming && !options_.h5_out.empty() && std::filesystem::exists(options_.h5_out, ec))
    GLACIER_LOG_WARN("replacing the existing results file %s (to continue it instead, run with --resume)",
                     options_.h5_out.c_str());
  if (!options_.h5_out.empty())
    h5_ = std::make_unique<io::ResultsFile>(options_.h5_out,
                                            resuming ? io::ResultsFile::Mode::Resume : io::ResultsFile::Mode::Create);
  // The JSONL is always rewritten whole: a resumed run re-emits the finished rows from the HDF5 file.
  if (!options_.jsonl_out.empty()) jsonl_ = std::make_unique<io::OrderedLineWriter>(options_.jsonl_out);
  opened_ = true;
  last_flush_ = now_seconds();
}

void ResultSink::write_provenance(int64_t resumes) {
  if (!h5_) return;
  const Provenance& p = provenance_;
  h5_->set_attribute("model_path", p.model_path);
  h5_->set_attribute("model_bytes", static_cast<int64_t>(p.model_bytes));
  h5_->set_attribute("model_sha256", p.model_sha256);
  h5_->set_attribute("tensor_types", p.tensor_types);
  h5_->set_attribute("layer_split", p.layer_split);
  h5_->set_attribute("ranks", static_cast<int64_t>(p.ranks));
  h5_->set_attribute("hosts", p.hosts);
  h5_->set_attribute("options", p.options);
  h5_->set_attribute("glacier_version", p.version);
  h5_->set_attribute("mode", p.mode);
  h5_->set_attribute("prompts_path", options_.prompts);
  h5_->set_attribute("prompt_count", static_cast<int64_t>(records_.size()));
  h5_->set_attribute(kResumesAttribute, resumes);
  h5_->flush();  // a job killed before its first result still leaves a file that says what it was
}

std::vector<bool> ResultSink::resume() {
  GLACIER_ASSERT(options_.resume && !opened_, "ResultSink::resume() needs --resume and must come before put()");
  const std::string& path = options_.h5_out;
  const io::FinishedResults file = io::read_finished(path);
  require_same(file, path, "model_sha256", provenance_.model_sha256);
  require_same(file, path, "mode", provenance_.mode);
  require_same(file, path, "options", provenance_.options);

  std::vector<bool> finished(records_.size(), false);
  std::vector<const io::ResultRecord*> row_of(records_.size(), nullptr);
  int64_t unmatched = 0;
  for (const auto& row : file.rows) {
    const bool known = row.index >= 0 && static_cast<size_t>(row.index) < records_.size() &&
                       records_[static_cast<size_t>(row.index)].id == row.id;
    if (!known) {
      ++unmatched;
      continue;
    }
    const auto i = static_cast<size_t>(row.index);
    if (finished[i]) continue;  // a repeated row: the first one stands
    finished[i] = true;
    row_of[i] = &row;
  }
  int64_t resumes = 0;
  if (auto it = file.attributes.find(kResumesAttribute); it != file.attributes.end())
    if (const auto* n = std::get_if<int64_t>(&it->second)) resumes = *n;

  open_outputs(true);
  write_provenance(resumes + 1);
  for (size_t i = 0; i < row_of.size(); ++i) {
    if (!row_of[i]) continue;
    write_jsonl(*row_of[i]);
    ++done_;
  }
  if (unmatched > 0)
    GLACIER_LOG_WARN("%s: %lld rows match no prompt of %s (id differs at that index); those prompts run again",
                     path.c_str(), static_cast<long long>(unmatched), options_.prompts.c_str());
  GLACIER_LOG_INFO("resuming %s: %lld of %zu prompts already finished", path.c_str(), static_cast<long long>(done_),
                   records_.size());
  return finished;
}

void ResultSink::write_jsonl(const io::ResultRecord& r) {
  if (!jsonl_) return;
  const io::PromptRecord& record = records_[static_cast<size_t>(r.index)];
  if (record.format != io::PromptFormat::OpenAiBatch) {
    jsonl_->put(r.index, io::format_result_line(r));
    return;
  }
  io::OpenAiBatchLine line;
  line.custom_id = record.custom_id.value_or(record.id);
  line.request_number = r.index + 1;
  line.chat = record.is_chat();
  jsonl_->put(r.index, io::format_openai_batch_line(r, line));
}

void ResultSink::put(const io::ResultRecord& r) {
  GLACIER_ASSERT(opened_ && !finished_, "ResultSink::put() before resume() or after finish()");
  GLACIER_ASSERT(r.index >= 0 && static_cast<size_t>(r.index) < records_.size(),
                 std::string("result index ").append(std::to_string(r.index)) + " outside the " + std::to_string(records_.size()) +
                     " prompts");
  write_jsonl(r);
  ++done_;
  if (!h5_) return;
  if (!h5_error_.empty()) throw std::runtime_error(h5_error_);
  pending_.push_back(r);
  if (static_cast<int64_t>(pending_.size()) >= options_.flush_every ||
      now_seconds() - last_flush_ >= options_.flush_seconds)
    flush();
}

void ResultSink::tick() {
  if (opened_ && !finished_ && h5_ && h5_error_.empty() && !pending_.empty() &&
      now_seconds() - last_flush_ >= options_.flush_seconds)
    flush();
}

void ResultSink::check_space() const {
  const std::optional<uint64_t> free = free_space_ ? free_space_(h5_->path()) : std::nullopt;
  if (!free) return;
  uint64_t needed = kSpaceMargin;
  for (const auto& r : pending_) needed += 2 * estimated_bytes(r);  // new heap space may come before the old is freed
  if (*free >= needed) return;
  throw std::runtime_error("cannot write results to " + h5_->path() + ": the disk is (nearly) full, " +
                           std::to_string(*free >> 10) + " KiB free, a flush of " + std::to_string(pending_.size()) +
                           " rows needs about " + std::to_string(needed >> 10) +
                           " KiB; the file was left as it was after its last flush");
}

void ResultSink::fail_h5(const std::string& message) {
  h5_error_ = message;
  pending_.clear();  // never handed to the file, so closing it writes nothing more
  throw std::runtime_error(message);
}

void ResultSink::flush() {
  if (!h5_error_.empty()) throw std::runtime_error(h5_error_);
  try {
    check_space();
    for (const auto& r : pending_) h5_->append(r);
    pending_.clear();
    h5_->flush();
  } catch (const std::exception& e) {
    fail_h5(e.what());
  }
  last_flush_ = now_seconds();
}

void ResultSink::finish() {
  if (finished_) return;
  finished_ = true;
  std::exception_ptr first_error;
  if (h5_) {
    try {
      flush();
      h5_->close();
    } catch (...) {
      first_error = std::current_exception();
    }
  }
  if (jsonl_) {
    try {
      jsonl_->finish();
      jsonl_.reset();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace glacier::app
