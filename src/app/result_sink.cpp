// ResultSink: output path checks, provenance attributes, the flush policy, and resuming from the
// rows an interrupted run left in its HDF5 file (only those that answer today's prompts).
#include "app/result_sink.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <exception>
#include <filesystem>
#include <variant>

#include "app/output_guard.h"
#include "app/prompt_sampling.h"
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

std::string attribute_text(const io::FinishedResults& file, const std::string& name) {
  auto it = file.attributes.find(name);
  return it == file.attributes.end() ? std::string() : show_attribute(it->second);
}

[[noreturn]] void refuse_resume(const std::string& path, const std::string& what) {
  throw InputError("--resume: cannot resume from " + path + ": " + what +
                   "; rerun with the same model and settings, or write to a new --out file");
}

// The attribute holding JSON; a missing or unreadable one is refused, naming it.
nlohmann::json json_attribute(const io::FinishedResults& file, const std::string& path, const std::string& name) {
  const std::string text = attribute_text(file, name);
  try {
    if (!text.empty()) return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
  }
  refuse_resume(path, "expected a JSON attribute " + name + ", found " + (text.empty() ? "none" : "'" + text + "'"));
}

void check_path(const char* option, const std::string& path) {
  try {
    io::check_writable(path);
  } catch (const InputError& e) {
    throw InputError(std::string(option) + ": " + e.what());
  }
}

// What a row adds to the file, generously: its strings and lists plus a heap id per column.
uint64_t estimated_bytes(const io::ResultRecord& r) {
  constexpr uint64_t kPerRowOverhead = 16 * 16;
  const uint64_t strings = r.id.size() + r.status.size() + r.error.size() + r.text.size() + r.finish_reason.size();
  const uint64_t lists = 4 * (r.prompt_tokens.size() + r.tokens.size() + r.logprobs.size());
  return strings + lists + kPerRowOverhead;
}

// Where a replacement results file is built before it is moved over --out: beside it (a rename does
// not cross file systems), named for the process so two attempts never share one.
std::string temporary_path(const std::string& out) { return out + ".new-" + std::to_string(::getpid()); }

// OpenAI's "created" of every line: when the file's first run started, so a resumed run writes the
// lines an uninterrupted one would. Now, should that time not read as "YYYY-MM-DDTHH:MM:SSZ".
int64_t unix_seconds(const std::string& utc) {
  std::tm tm{};
  const char* end = strptime(utc.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (!end || *end != '\0') return static_cast<int64_t>(std::time(nullptr));
  return static_cast<int64_t>(timegm(&tm));
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
  check_outputs_apart_from_inputs(o);
  if (!o.jsonl_out.empty()) check_path("--jsonl", o.jsonl_out);
  if (o.h5_out.empty()) return;
  check_path("--out", o.h5_out);
  if (!o.resume) return;
  try {
    io::read_finished(o.h5_out);  // a glacier results file of this format, with readable rows
  } catch (const InputError& e) {
    throw InputError(std::string("--resume: ") + e.what());
  }
}

ResultSink::ResultSink(const JobOptions& o, const Provenance& p, const std::vector<io::PromptRecord>& records)
    : options_(o), provenance_(p), records_(records), last_flush_(now_seconds()) {
  digests_.reserve(records.size());
  int64_t row = 0;
  for (const auto& rec : records) {
    digests_.push_back(prompt_digest(rec, o));
    if (rec.ok) top_logprobs_width_ = std::max(top_logprobs_width_, sampling_for(rec, o).top_logprobs);
    if (rec.ok) prompt_logprobs_width_ = std::max(prompt_logprobs_width_, sampling_for(rec, o).prompt_logprobs);
    samples_.push_back(result_rows(rec, o));
    first_row_.push_back(row);
    row += samples_.back();
  }
  rows_put_.assign(records.size(), 0);
  if (!o.resume) open_outputs({}, nlohmann::json::array(), 0);
}

ResultSink::~ResultSink() {
  if (h5_ && h5_->path() != options_.h5_out) {  // never moved into place: a failed start
    h5_.reset();
    std::error_code ec;
    std::filesystem::remove(temporary_path(options_.h5_out), ec);
  }
}

// One entry of the file's "runs" attribute: who ran the job, where and with what.
static nlohmann::json this_run(const Provenance& p) {
  return {{"started_at", p.started_at}, {"command_line", p.command_line}, {"hosts", p.hosts},   {"ranks", p.ranks},
          {"version", p.version},       {"commit", p.commit},             {"kernels", p.kernels}, {"batch_job", nlohmann::json::parse(p.batch_job.empty() ? "{}" : p.batch_job)},
          {"decode_groups", nlohmann::json::parse(p.decode_groups.empty() ? "{}" : p.decode_groups)}};
}

void ResultSink::open_outputs(const std::vector<io::ResultRecord>& rows, nlohmann::json runs, int64_t resumes) {
  runs.push_back(this_run(provenance_));
  runs_ = std::move(runs);
  created_ = unix_seconds(runs_[0].is_object() ? runs_[0].value("started_at", std::string()) : std::string());
  if (!options_.h5_out.empty()) {
    std::error_code ec;
    if (!options_.resume && std::filesystem::exists(options_.h5_out, ec))
      GLACIER_LOG_WARN("replacing the existing results file %s (to continue it instead, run with --resume)",
                       options_.h5_out.c_str());
    const std::string building = temporary_path(options_.h5_out);
    h5_ = std::make_unique<io::ResultsFile>(building, io::ResultsFile::Mode::Create, top_logprobs_width_,
                                            prompt_logprobs_width_);
    write_provenance(resumes);
    for (const auto& r : rows) h5_->append(r);
    h5_->move_to(options_.h5_out);
  }
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
  h5_->set_attribute("result_settings", p.settings);
  h5_->set_attribute("glacier_version", p.version);
  h5_->set_attribute("glacier_commit", p.commit);
  h5_->set_attribute("kernels", p.kernels);
  h5_->set_attribute("decode_groups", p.decode_groups.empty() ? std::string("{}") : p.decode_groups);
  h5_->set_attribute("mode", p.mode);
  h5_->set_attribute("command_line", p.command_line);
  h5_->set_attribute("started_at", p.started_at);
  h5_->set_attribute("batch_job", p.batch_job.empty() ? std::string("{}") : p.batch_job);
  h5_->set_attribute("prompts_path", options_.prompts);
  h5_->set_attribute("prompts_sha256", p.prompts_sha256);
  h5_->set_attribute("prompt_count", static_cast<int64_t>(records_.size()));
  h5_->set_attribute("runs", runs_.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  h5_->set_attribute(kResumesAttribute, resumes);
  h5_->flush();  // a job killed before its first result still leaves a file that says what it was
}

std::vector<bool> ResultSink::resume() {
  GLACIER_ASSERT(options_.resume && !opened_, "ResultSink::resume() needs --resume and must come before put()");
  const std::string& path = options_.h5_out;
  const io::FinishedResults file = io::read_finished(path);
  const std::string model_then = attribute_text(file, "model_sha256");
  if (model_then != provenance_.model_sha256)
    refuse_resume(path, "the model's SHA-256 is " + (model_then.empty() ? std::string("(absent)") : model_then) +
                            " in the file but " + provenance_.model_sha256 + " for " + provenance_.model_path);
  const nlohmann::json settings_then = json_attribute(file, path, "result_settings");
  if (auto difference = setting_differences(settings_then, nlohmann::json::parse(provenance_.settings)))
    refuse_resume(path, "result-changing settings differ: " + *difference);

  // Each prompt's matching rows by sample (the first of any repeats); complete prompts are kept.
  std::vector<std::vector<const io::ResultRecord*>> by_sample(records_.size());
  int64_t other_prompt = 0, changed = 0, repeated = 0, incomplete = 0;
  for (const auto& row : file.rows) {
    const bool in_range = row.index >= 0 && static_cast<size_t>(row.index) < records_.size();
    const auto i = static_cast<size_t>(row.index);
    if (!in_range || records_[i].id != row.id) {
      ++other_prompt;
    } else if (digests_[i] != row.prompt_digest || row.sample < 0 || row.sample >= samples_[i]) {
      ++changed;  // the digest covers the sampling, n included: a sample past n means another n
    } else {
      auto& slots = by_sample[i];
      slots.resize(static_cast<size_t>(samples_[i]), nullptr);
      const io::ResultRecord*& slot = slots[static_cast<size_t>(row.sample)];
      if (slot)
        ++repeated;
      else
        slot = &row;
    }
  }
  std::vector<bool> finished(records_.size(), false);
  std::vector<io::ResultRecord> kept;
  for (size_t i = 0; i < records_.size(); ++i) {
    const auto& slots = by_sample[i];
    if (slots.empty()) continue;
    const auto present = std::count_if(slots.begin(), slots.end(), [](const io::ResultRecord* r) { return r != nullptr; });
    if (present < samples_[i]) {  // rerun the whole prompt: its samples come from one prefill
      incomplete += present;
      continue;
    }
    finished[i] = true;
    for (const io::ResultRecord* r : slots) kept.push_back(*r);
  }
  int64_t resumes = 0;
  if (auto it = file.attributes.find(kResumesAttribute); it != file.attributes.end())
    if (const auto* n = std::get_if<int64_t>(&it->second)) resumes = *n;
  nlohmann::json runs = json_attribute(file, path, "runs");
  if (!runs.is_array()) refuse_resume(path, "expected attribute runs to be a JSON array, found " + runs.dump());

  open_outputs(kept, std::move(runs), resumes + 1);
  for (const auto& row : kept) {
    write_jsonl(row);
    const auto i = static_cast<size_t>(row.index);
    if (++rows_put_[i] == samples_[i]) ++done_;
  }
  if (other_prompt + changed + repeated + incomplete > 0)
    GLACIER_LOG_WARN("%s: dropped %lld rows whose index holds another prompt id in %s, %lld whose prompt line or "
                     "sampling changed, %lld repeated, %lld of prompts with samples missing; those prompts run again",
                     path.c_str(), static_cast<long long>(other_prompt), options_.prompts.c_str(),
                     static_cast<long long>(changed), static_cast<long long>(repeated), static_cast<long long>(incomplete));
  GLACIER_LOG_INFO("resuming %s: %lld of %zu prompts already finished", path.c_str(), static_cast<long long>(done_),
                   records_.size());
  return finished;
}

io::ResultRecord ResultSink::with_prompt_facts(const io::ResultRecord& r) const {
  io::ResultRecord out = r;
  const auto i = static_cast<size_t>(r.index);
  out.prompt_digest = digests_[i];
  out.sampling = sampling_text(records_[i], options_);
  return out;
}

void ResultSink::write_jsonl(const io::ResultRecord& r) {
  if (!jsonl_) return;
  const io::PromptRecord& record = records_[static_cast<size_t>(r.index)];
  const int64_t row = first_row_[static_cast<size_t>(r.index)] + r.sample;
  const int32_t n_rows = samples_[static_cast<size_t>(r.index)];
  const bool openai = record.format == io::PromptFormat::OpenAiBatch;
  if (record.continuations || (openai && n_rows > 1)) {
    // One line for all of a record's rows (its continuations, or an OpenAI request's choices), once the
    // last has come.
    std::vector<io::ResultRecord>& rows = grouped_rows_[r.index];
    rows.push_back(r);
    if (rows.size() < static_cast<size_t>(n_rows)) return;
    std::sort(rows.begin(), rows.end(), [](const io::ResultRecord& a, const io::ResultRecord& b) { return a.sample < b.sample; });
    const int64_t first = first_row_[static_cast<size_t>(r.index)];
    if (record.continuations) {
      std::vector<size_t> text_bytes;
      for (const std::string& text : *record.continuations) text_bytes.push_back(text.size());
      jsonl_->put(first, io::format_continuations_line(rows, text_bytes));
    } else {
      // A prompt array's rows are its elements' n samples each, in element order.
      const auto per_element = std::max<int32_t>(1, n_rows / static_cast<int32_t>(record.prompt_elements()));
      jsonl_->put(first, io::format_openai_batch_line(rows, openai_line(record, r.index, per_element)));
    }
    for (size_t k = 1; k < rows.size(); ++k) jsonl_->skip(first + static_cast<int64_t>(k));
    grouped_rows_.erase(r.index);
    return;
  }
  if (!openai) {
    jsonl_->put(row, io::format_result_line(r, token_text_));
    return;
  }
  jsonl_->put(row, io::format_openai_batch_line(r, openai_line(record, r.index, 1)));
}

io::OpenAiBatchLine ResultSink::openai_line(const io::PromptRecord& record, int64_t index, int32_t n) const {
  io::OpenAiBatchLine line;
  line.custom_id = record.custom_id.value_or(record.id);
  line.request_number = index + 1;
  line.n = n;
  line.chat = record.is_chat();
  line.bad_request = !record.ok;
  line.model = std::filesystem::path(options_.model).filename().string();
  line.created = created_;
  line.logprobs = record.openai_logprobs;
  line.prompt_logprobs = record.prompt_logprobs.has_value();
  line.token_text = token_text_;
  return line;
}

void ResultSink::put(const io::ResultRecord& r) {
  GLACIER_ASSERT(opened_ && !finished_, "ResultSink::put() before resume() or after finish()");
  GLACIER_ASSERT(r.index >= 0 && static_cast<size_t>(r.index) < records_.size(),
                 std::string("result index ").append(std::to_string(r.index)) + " outside the " + std::to_string(records_.size()) +
                     " prompts");
  const auto i = static_cast<size_t>(r.index);
  GLACIER_ASSERT(r.sample >= 0 && r.sample < samples_[i] && rows_put_[i] < samples_[i],
                 "a result row for one of the prompt's samples, once");
  write_jsonl(r);
  if (++rows_put_[i] == samples_[i]) ++done_;
  if (!h5_) return;
  if (!h5_error_.empty()) throw std::runtime_error(h5_error_);
  pending_.push_back(with_prompt_facts(r));
  if (static_cast<int64_t>(pending_.size()) >= options_.flush_every ||
      now_seconds() - last_flush_ >= options_.flush_seconds)
    flush();
}

void ResultSink::record_attribute(const std::string& name, const std::string& value) {
  GLACIER_ASSERT(opened_ && !finished_, "ResultSink::record_attribute() before the file is open or after finish()");
  if (h5_) h5_->set_attribute(name, value);
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
      if (!runs_.empty()) runs_.back()["finished_at"] = utc_timestamp();
      h5_->set_attribute("finished_at", utc_timestamp());
      h5_->set_attribute("runs", runs_.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
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
