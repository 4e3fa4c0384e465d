// JSON line formatting of results (glacier format and OpenAI batch format) and in-order line output.
#include "io/jsonl_writer.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "io/utf8.h"
#include "util/error.h"

namespace glacier::io {
namespace {

using nlohmann::json;

// The double whose shortest decimal form is the float's shortest decimal form: nlohmann prints it
// as e.g. -0.1 instead of -0.10000000149011612, and reading that back as float32 gives the value.
json json_float(float value) {
  if (!std::isfinite(value)) return nullptr;  // JSON has no inf/nan
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf - 1, value);
  *end = '\0';
  return std::strtod(buf, nullptr);
}

json json_floats(const std::vector<float>& values) {
  json out = json::array();
  for (float v : values) out.push_back(json_float(v));
  return out;
}

// Repairs every string in `value` with replace_invalid_utf8, the rule the HDF5 string columns share
// (nlohmann's own replacement is another rule; after this it never fires).
void repair_strings(json& value) {
  if (value.is_string()) {
    auto& text = value.get_ref<std::string&>();
    if (find_invalid_utf8(text)) text = replace_invalid_utf8(text);
  } else if (value.is_structured()) {
    for (auto& item : value) repair_strings(item);  // object keys are this file's ASCII names
  }
}

std::string dump_line(json object) {
  repair_strings(object);
  return object.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

json completion_choice(const ResultRecord& r, const OpenAiBatchLine& line) {
  json finish = r.finish_reason.empty() ? json(nullptr) : json(r.finish_reason);
  json choice = {{"index", 0}, {"finish_reason", finish}};
  const bool with_texts = line.token_texts && line.token_texts->size() == r.logprobs.size();
  if (line.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", r.text}};
    json content = json::array();
    for (size_t i = 0; i < r.logprobs.size(); ++i) {
      json item = {{"logprob", json_float(r.logprobs[i])}};
      if (with_texts) item["token"] = (*line.token_texts)[i];
      content.push_back(std::move(item));
    }
    choice["logprobs"] = {{"content", std::move(content)}};
  } else {
    choice["text"] = r.text;
    json logprobs = {{"token_logprobs", json_floats(r.logprobs)}};
    if (with_texts) logprobs["tokens"] = *line.token_texts;
    choice["logprobs"] = std::move(logprobs);
  }
  return choice;
}

}  // namespace

std::string format_result_line(const ResultRecord& r) {
  json line = {{"id", r.id},
               {"status", r.status},
               {"prompt_tokens", r.prompt_tokens},
               {"tokens", r.tokens},
               {"text", r.text},
               {"logprobs", json_floats(r.logprobs)},
               {"finish_reason", r.finish_reason},
               {"sample", r.sample}};
  if (r.status == "error") line["error"] = r.error;
  if (r.score) {
    line["sum_logprob"] = std::isfinite(r.sum_logprob) ? json(r.sum_logprob) : json(nullptr);
    line["greedy"] = r.greedy;
  }
  return dump_line(std::move(line));
}

std::string format_openai_batch_line(const ResultRecord& r, const OpenAiBatchLine& line) {
  json out = {{"id", "batch_req_" + std::to_string(line.request_number)}, {"custom_id", line.custom_id}};
  if (r.status != "ok") {
    out["response"] = nullptr;
    out["error"] = {{"code", "request_failed"}, {"message", r.error}};
    return dump_line(std::move(out));
  }
  const auto n_prompt = static_cast<int64_t>(r.prompt_tokens.size());
  const auto n_completion = static_cast<int64_t>(r.tokens.size());
  json body = {{"object", line.chat ? "chat.completion" : "text_completion"},
               {"choices", json::array({completion_choice(r, line)})},
               {"usage",
                {{"prompt_tokens", n_prompt},
                 {"completion_tokens", n_completion},
                 {"total_tokens", n_prompt + n_completion}}}};
  if (!line.model.empty()) body["model"] = line.model;
  out["response"] = {{"status_code", 200}, {"body", std::move(body)}};
  out["error"] = nullptr;
  return dump_line(std::move(out));
}

void write_openai_batch_line(std::ostream& out, const ResultRecord& result, const OpenAiBatchLine& line) {
  out << format_openai_batch_line(result, line);
}

OrderedLineWriter::OrderedLineWriter(const std::string& path, bool append)
    : path_(path), out_(path, std::ios::binary | (append ? std::ios::app : std::ios::trunc)) {
  if (!out_) throw InputError("cannot open output file " + path + " for writing: " + std::strerror(errno));
}

OrderedLineWriter::~OrderedLineWriter() {
  try {
    finish();
  } catch (...) {
    // A destructor must not throw; callers that care about the error call finish() themselves.
  }
}

void OrderedLineWriter::put(int64_t index, std::string line) {
  GLACIER_ASSERT(index >= next_ && !pending_.count(index), "result index written twice: " + std::to_string(index));
  if (line.empty() || line.back() != '\n') line.push_back('\n');
  pending_.emplace(index, std::move(line));
  drain();
}

void OrderedLineWriter::skip(int64_t index) {
  if (index < next_ || pending_.count(index)) return;
  pending_.emplace(index, std::string());
  drain();
}

void OrderedLineWriter::drain() {
  while (!pending_.empty() && pending_.begin()->first == next_) {
    out_ << pending_.begin()->second;
    pending_.erase(pending_.begin());
    ++next_;
  }
  check_stream();
}

void OrderedLineWriter::finish() {
  for (auto& [index, line] : pending_) {
    out_ << line;
    next_ = index + 1;
  }
  pending_.clear();
  out_.flush();
  check_stream();
}

void OrderedLineWriter::check_stream() {
  if (!out_) throw std::runtime_error("cannot write to " + path_ + ": " + std::strerror(errno));
}

void write_results_jsonl(const std::string& path, std::vector<ResultRecord> results) {
  std::sort(results.begin(), results.end(),
            [](const ResultRecord& a, const ResultRecord& b) { return a.index < b.index; });
  OrderedLineWriter writer(path);
  for (const auto& r : results) writer.put(r.index, format_result_line(r));  // gaps wait, finish() writes them
  writer.finish();
}

}  // namespace glacier::io
