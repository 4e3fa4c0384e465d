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

json token_bytes(const std::string& piece) {
  json out = json::array();
  for (unsigned char c : piece) out.push_back(static_cast<int>(c));
  return out;
}

// Rows that asked for k alternatives: per generated token, k {"id", "token", "logprob"}.
json glacier_top_logprobs(const ResultRecord& r, const TokenText& token_text) {
  GLACIER_ASSERT(static_cast<bool>(token_text), "token texts for a row with top_logprobs");
  const auto k = static_cast<size_t>(r.top_logprobs);
  json out = json::array();
  for (size_t t = 0; t < r.tokens.size(); ++t) {
    json alternatives = json::array();
    for (size_t j = t * k; j < (t + 1) * k; ++j)
      alternatives.push_back({{"id", r.top_ids[j]}, {"token", token_text(r.top_ids[j])}, {"logprob", json_float(r.top_values[j])}});
    out.push_back(std::move(alternatives));
  }
  return out;
}

// Per prompt token: null for the first (no earlier token predicts it), else entry(t).
template <typename Entry>
json per_prompt_token(const ResultRecord& r, Entry&& entry) {
  json out = json::array();
  for (size_t t = 0; t < r.prompt_tokens.size(); ++t) out.push_back(t == 0 ? json(nullptr) : entry(t));
  return out;
}

// Rows that carry prompt log-probs: per prompt token null (the first) or {"id", "token", "logprob",
// "top_logprobs": k {"id", "token", "logprob"}}.
json glacier_prompt_logprobs(const ResultRecord& r, const TokenText& token_text) {
  GLACIER_ASSERT(static_cast<bool>(token_text), "token texts for a row with prompt_logprobs");
  const auto k = static_cast<size_t>(r.prompt_logprobs);
  GLACIER_ASSERT(r.prompt_logprob_values.size() == r.prompt_tokens.size() && r.prompt_top_ids.size() == r.prompt_tokens.size() * k,
                 "a prompt log-prob and k alternatives per prompt token");
  return per_prompt_token(r, [&](size_t t) {
    json alternatives = json::array();
    for (size_t j = t * k; j < (t + 1) * k; ++j)
      alternatives.push_back(
          {{"id", r.prompt_top_ids[j]}, {"token", token_text(r.prompt_top_ids[j])}, {"logprob", json_float(r.prompt_top_values[j])}});
    return json{{"id", r.prompt_tokens[t]},
                {"token", token_text(r.prompt_tokens[t])},
                {"logprob", json_float(r.prompt_logprob_values[t])},
                {"top_logprobs", std::move(alternatives)}};
  });
}

// vLLM's OpenAI-server prompt_logprobs: per prompt token null (the first) or {"<token id>": {"logprob",
// "rank", "decoded_token"}} holding the prompt token and the k most likely. A rank is the 1-based place
// among the k (ties: lower id first); the prompt token's is null when it is not among them (not computed).
json vllm_prompt_logprobs(const ResultRecord& r, const TokenText& token_text) {
  const auto k = static_cast<size_t>(r.prompt_logprobs);
  return per_prompt_token(r, [&](size_t t) {
    json entries = json::object();
    const int32_t token = r.prompt_tokens[t];
    entries[std::to_string(token)] = {
        {"logprob", json_float(r.prompt_logprob_values[t])}, {"rank", nullptr}, {"decoded_token", token_text(token)}};
    for (size_t j = 0; j < k; ++j) {
      const int32_t id = r.prompt_top_ids[t * k + j];
      entries[std::to_string(id)] = {{"logprob", json_float(r.prompt_top_values[t * k + j])},
                                     {"rank", j + 1},
                                     {"decoded_token", token_text(id)}};
    }
    return entries;
  });
}

// OpenAI's completions log-probs: the tokens' texts, their log-probs, per token {text: logprob} of the
// alternatives (null when none were asked; of alternatives sharing a text, the likelier one), and each
// token's byte offset in the choice's text.
json completion_logprobs(const ResultRecord& r, const OpenAiBatchLine& line) {
  const auto k = static_cast<size_t>(r.top_logprobs);
  json tokens = json::array(), offsets = json::array(), top = k > 0 ? json::array() : json(nullptr);
  size_t offset = 0;
  for (size_t t = 0; t < r.tokens.size(); ++t) {
    const std::string piece = line.token_text(r.tokens[t]);
    tokens.push_back(piece);
    offsets.push_back(offset);
    offset += piece.size();
    if (k == 0) continue;
    json alternatives = json::object();
    for (size_t j = t * k; j < (t + 1) * k; ++j) {
      std::string text = line.token_text(r.top_ids[j]);
      if (find_invalid_utf8(text)) text = replace_invalid_utf8(text);  // as repair_strings would: one key
      if (!alternatives.contains(text)) alternatives[text] = json_float(r.top_values[j]);
    }
    top.push_back(std::move(alternatives));
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", json_floats(r.logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

// OpenAI's chat log-probs: per token {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
// "bytes"}]}, "bytes" the token's raw UTF-8 bytes (its "token" text is repaired when they are invalid).
json chat_logprobs(const ResultRecord& r, const OpenAiBatchLine& line) {
  const auto k = static_cast<size_t>(r.top_logprobs);
  json content = json::array();
  for (size_t t = 0; t < r.tokens.size(); ++t) {
    const std::string piece = line.token_text(r.tokens[t]);
    json alternatives = json::array();
    for (size_t j = t * k; j < (t + 1) * k; ++j) {
      const std::string text = line.token_text(r.top_ids[j]);
      alternatives.push_back({{"token", text}, {"logprob", json_float(r.top_values[j])}, {"bytes", token_bytes(text)}});
    }
    content.push_back({{"token", piece},
                       {"logprob", json_float(r.logprobs[t])},
                       {"bytes", token_bytes(piece)},
                       {"top_logprobs", std::move(alternatives)}});
  }
  return {{"content", std::move(content)}};
}

// `prompt_row`: the row that carries the choice's prompt log-probs (its prompt element's first sample).
json completion_choice(const ResultRecord& r, const ResultRecord& prompt_row, const OpenAiBatchLine& line, int64_t index) {
  json finish = r.finish_reason.empty() ? json(nullptr) : json(r.finish_reason);
  json choice = {{"index", index}};
  GLACIER_ASSERT(!(line.logprobs || line.prompt_logprobs) || static_cast<bool>(line.token_text),
                 "token texts for an OpenAI line with logprobs");
  if (line.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", r.text}};
    choice["logprobs"] = line.logprobs ? chat_logprobs(r, line) : json(nullptr);
  } else {
    choice["text"] = r.text;
    choice["logprobs"] = line.logprobs ? completion_logprobs(r, line) : json(nullptr);
    // vLLM's extra field, on every choice of the prompt (as vLLM writes it).
    if (line.prompt_logprobs) choice["prompt_logprobs"] = vllm_prompt_logprobs(prompt_row, line.token_text);
  }
  choice["finish_reason"] = std::move(finish);
  return choice;
}

}  // namespace

std::string format_result_line(const ResultRecord& r, const TokenText& token_text) {
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
  if (r.top_logprobs > 0) line["top_logprobs"] = glacier_top_logprobs(r, token_text);
  if (r.prompt_logprobs >= 0) line["prompt_logprobs"] = glacier_prompt_logprobs(r, token_text);
  return dump_line(std::move(line));
}

std::string format_continuations_line(const std::vector<ResultRecord>& rows, const std::vector<size_t>& text_bytes) {
  GLACIER_ASSERT(!rows.empty() && rows.size() == text_bytes.size(), "a row and a text length for every continuation");
  const auto finite_or_null = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  json list = json::array();
  const ResultRecord* failed = nullptr;
  for (size_t k = 0; k < rows.size(); ++k) {
    const ResultRecord& r = rows[k];
    GLACIER_ASSERT(r.sample == static_cast<int64_t>(k), "continuation rows in index order");
    json c = {{"index", r.sample}, {"status", r.status}, {"tokens", r.tokens}, {"text", r.text},
              {"logprobs", json_floats(r.logprobs)}};
    if (r.status == "ok") {
      c["sum_logprob"] = finite_or_null(r.sum_logprob);
      c["logprob_per_token"] = finite_or_null(r.sum_logprob / static_cast<double>(r.tokens.size()));
      c["logprob_per_byte"] = finite_or_null(r.sum_logprob / static_cast<double>(text_bytes[k]));
      c["greedy"] = r.greedy;
    } else {
      c["error"] = r.error;
      if (!failed) failed = &r;
    }
    list.push_back(std::move(c));
  }
  json line = {{"id", rows.front().id},
               {"status", failed ? "error" : "ok"},
               {"prompt_tokens", rows.front().prompt_tokens},
               {"continuations", std::move(list)}};
  if (failed) line["error"] = failed->error;
  return dump_line(std::move(line));
}

std::string format_openai_batch_line(const std::vector<ResultRecord>& choices, const OpenAiBatchLine& line) {
  GLACIER_ASSERT(!choices.empty() && line.n >= 1, "an OpenAI batch line answers with at least one choice");
  const std::string number = std::to_string(line.request_number);
  json out = {{"id", "batch_req_" + number}, {"custom_id", line.custom_id}};
  const auto failed = std::find_if(choices.begin(), choices.end(), [](const ResultRecord& r) { return r.status != "ok"; });
  if (failed != choices.end()) {
    // OpenAI's error body for a request it refused, and the batch line's own {code, message}.
    json error = {{"message", failed->error},
                  {"type", "invalid_request_error"},
                  {"param", nullptr},
                  {"code", line.bad_request ? "invalid_request" : "request_failed"}};
    out["response"] = {{"status_code", 400}, {"request_id", "req_" + number}, {"body", {{"error", error}}}};
    out["error"] = {{"code", error["code"]}, {"message", failed->error}};
    return dump_line(std::move(out));
  }
  int64_t n_prompt = 0, n_completion = 0;
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ResultRecord& r = choices[i];
    // Every sample of one prompt element saw the same prompt: OpenAI counts its tokens once.
    if (static_cast<int64_t>(i) % line.n == 0) n_prompt += static_cast<int64_t>(r.prompt_tokens.size());
    n_completion += static_cast<int64_t>(r.tokens.size());
    const ResultRecord& prompt_row = choices[i - i % static_cast<size_t>(line.n)];
    GLACIER_ASSERT(!line.prompt_logprobs || prompt_row.prompt_logprobs >= 0, "prompt log-probs on each prompt's first choice");
    list.push_back(completion_choice(r, prompt_row, line, static_cast<int64_t>(i)));
  }
  json body = {{"id", (line.chat ? "chatcmpl-" : "cmpl-") + number},
               {"object", line.chat ? "chat.completion" : "text_completion"},
               {"created", line.created},
               {"model", line.model},
               {"choices", std::move(list)},
               {"usage",
                {{"prompt_tokens", n_prompt},
                 {"completion_tokens", n_completion},
                 {"total_tokens", n_prompt + n_completion}}}};
  // Chat: vLLM's extra field is the response's (one conversation a request).
  if (line.chat && line.prompt_logprobs) body["prompt_logprobs"] = vllm_prompt_logprobs(choices.front(), line.token_text);
  out["response"] = {{"status_code", 200}, {"request_id", "req_" + number}, {"body", std::move(body)}};
  out["error"] = nullptr;
  return dump_line(std::move(out));
}

std::string format_openai_batch_line(const ResultRecord& r, const OpenAiBatchLine& line) {
  return format_openai_batch_line(std::vector<ResultRecord>{r}, line);
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
