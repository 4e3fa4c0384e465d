// The field rules of one .jsonl prompt line: plain records {"id", "prompt", sampling...} and OpenAI
// batch request lines {"custom_id", "url", "body"}. Every rejection names the key, expected and found;
// a key that is not honoured is refused (a known but unimplemented one unless it holds its neutral value).
#include <algorithm>
#include <array>
#include <cfloat>
#include <limits>
#include <string_view>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "io/prompt_reader.h"
#include "model/chat_template.h"
#include "util/error.h"
#include "io/utf8.h"

namespace glacier::io {
namespace {

using nlohmann::json;

// Thrown inside this file only; parse_jsonl_prompt_line turns it into an error record.
struct BadLine : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Keeps messages one line long for huge values and keys.
std::string clip(std::string s) {
  static constexpr size_t kMaxShown = 60;
  if (s.size() <= kMaxShown) return s;
  // Cut before a character, not inside one, so the message stays valid UTF-8.
  size_t cut = kMaxShown;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

std::string describe(const json& value) {
  switch (value.type()) {
    case json::value_t::string: return "the string " + clip(value.dump(-1, ' ', false, json::error_handler_t::replace));
    case json::value_t::array: return "an array with " + std::to_string(value.size()) + " elements";
    case json::value_t::object: return "an object";
    case json::value_t::null: return "null";
    default: return clip(value.dump());
  }
}

// Reads keys of one JSON object; `prefix` ("body.") makes nested keys recognisable in messages.
class FieldReader {
 public:
  FieldReader(const json& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& expected, const json& found) const {
    throw BadLine("\"" + prefix_ + key + "\": expected " + expected + ", found " + describe(found));
  }
  [[noreturn]] void fail_missing(const std::string& key, const std::string& expected) const {
    throw BadLine("\"" + prefix_ + key + "\": expected " + expected + ", found no such key");
  }

  // A key whose value is null counts as absent: clients often write null for "unset".
  const json* find(const std::string& key) const {
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }

  std::optional<std::string> string(const std::string& key, bool allow_empty = true) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    const char* expected = allow_empty ? "a string" : "a non-empty string";
    if (!v->is_string()) fail(key, expected, *v);
    if (!allow_empty && v->get_ref<const std::string&>().empty()) fail(key, expected, *v);
    return v->get<std::string>();
  }

  std::optional<int64_t> integer(const std::string& key, int64_t lo, int64_t hi, const std::string& expected) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) fail(key, expected, *v);
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) fail(key, expected, *v);
    int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) fail(key, expected, *v);
    return x;
  }

  std::optional<uint64_t> unsigned_integer(const std::string& key, const std::string& expected) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (v->is_number_unsigned()) return v->get<uint64_t>();
    if (v->is_number_integer() && v->get<int64_t>() >= 0) return static_cast<uint64_t>(v->get<int64_t>());
    fail(key, expected, *v);
  }

  // lo_open/hi_open choose (lo, ...) vs [lo, ...).
  std::optional<double> number(const std::string& key, double lo, bool lo_open, double hi, bool hi_open,
                               const std::string& expected) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) fail(key, expected, *v);
    double x = v->get<double>();
    bool low_ok = lo_open ? x > lo : x >= lo;
    bool high_ok = hi_open ? x < hi : x <= hi;
    if (!low_ok || !high_ok) fail(key, expected, *v);
    return x;
  }

  std::optional<std::vector<std::string>> string_list(const std::string& key, bool allow_single_string) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    const char* expected = allow_single_string ? "a string or an array of strings" : "an array of strings";
    if (allow_single_string && v->is_string()) return std::vector<std::string>{v->get<std::string>()};
    if (!v->is_array()) fail(key, expected, *v);
    std::vector<std::string> out;
    for (const json& item : *v) {
      if (!item.is_string()) fail(key, std::string(expected) + " (every item)", item);
      out.push_back(item.get<std::string>());
    }
    return out;
  }

  std::vector<int32_t> token_ids(const std::string& key, const json& value) const {
    static const std::string expected = "a non-empty array of token ids (integers >= 0)";
    if (!value.is_array() || value.empty()) fail(key, expected, value);
    std::vector<int32_t> ids;
    ids.reserve(value.size());
    for (const json& item : value) {
      if (!item.is_number_integer() || (!item.is_number_unsigned() && item.get<int64_t>() < 0) ||
          item.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
        fail(key, expected, item);
      ids.push_back(static_cast<int32_t>(item.get<int64_t>()));
    }
    return ids;
  }

  std::optional<bool> boolean(const std::string& key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail(key, "true or false", *v);
    return v->get<bool>();
  }

  // An array (possibly empty) of at most max_ids distinct token ids.
  std::optional<std::vector<int32_t>> id_list(const std::string& key, size_t max_ids) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    const std::string expected = "an array of at most " + std::to_string(max_ids) + " distinct token ids (integers >= 0)";
    if (!v->is_array() || v->size() > max_ids) fail(key, expected, *v);
    std::vector<int32_t> ids;
    for (const json& item : *v) {
      if (!item.is_number_integer() || (!item.is_number_unsigned() && item.get<int64_t>() < 0) ||
          item.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
        fail(key, expected, item);
      const auto id = static_cast<int32_t>(item.get<int64_t>());
      if (std::find(ids.begin(), ids.end(), id) != ids.end()) fail(key, expected + " (each once)", item);
      ids.push_back(id);
    }
    return ids;
  }

  // {"token id": bias, ...}: decimal ids (JSON keys are strings), biases in [-100, 100], ascending ids.
  std::optional<std::vector<std::pair<int32_t, double>>> logit_bias(const std::string& key, size_t max_entries) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    const std::string expected = "an object of at most " + std::to_string(max_entries) +
                                 " entries \"token id\": bias, with ids decimal integers >= 0 and biases in [-100, 100]";
    if (!v->is_object() || v->size() > max_entries) fail(key, expected, *v);
    std::vector<std::pair<int32_t, double>> out;
    for (const auto& [id_text, bias] : v->items()) {
      const bool digits = !id_text.empty() && id_text.size() <= 10 && id_text.find_first_not_of("0123456789") == std::string::npos;
      const long long id = digits ? std::stoll(id_text) : -1;
      if (id < 0 || id > std::numeric_limits<int32_t>::max()) fail(key, expected + " (every key)", json(id_text));
      if (!bias.is_number() || !(bias.get<double>() >= -100.0 && bias.get<double>() <= 100.0))
        fail(key + "." + clip(id_text), "a bias in [-100, 100]", bias);
      out.emplace_back(static_cast<int32_t>(id), bias.get<double>());
    }
    std::sort(out.begin(), out.end());
    for (size_t i = 1; i < out.size(); ++i)
      if (out[i].first == out[i - 1].first)
        fail(key, expected + " (each id once)", json(std::to_string(out[i].first) + " twice"));
    return out;
  }

  // A chat conversation: a non-empty array of objects with a string role and a content.
  std::string messages(const std::string& key) const {
    const json* v = find(key);
    static const std::string expected = "a non-empty array of {\"role\": string, \"content\": string or array}";
    if (!v || !v->is_array() || v->empty()) {
      if (!v) fail_missing(key, expected);
      fail(key, expected, *v);
    }
    for (const json& m : *v) {
      if (!m.is_object()) fail(key, expected, m);
      auto role = m.find("role");
      if (role == m.end()) fail_missing(key + "[].role", "a string");
      if (!role->is_string()) fail(key + "[].role", "a string", *role);
      auto content = m.find("content");
      if (content == m.end()) fail_missing(key + "[].content", "a string or an array");
      if (!(content->is_string() || content->is_array() || content->is_null()))
        fail(key + "[].content", "a string or an array", *content);
    }
    std::string text = v->dump();
    // The chat templates' own reading, so that a conversation accepted here also renders (the content
    // parts, their "type" and "text"): a bad one fails this line now, not later in the job.
    try {
      model::parse_chat_messages(text);
    } catch (const InputError& e) {
      throw BadLine("\"" + prefix_ + key + "\": " + e.what());
    }
    return text;
  }

 private:
  const json& object_;
  std::string prefix_;
};

// Keys that change nothing here: an OpenAI body's "model" names the model the request was written for (the
// job runs the one --model gives, so the numbers do not depend on it) and "user" tags the caller for
// abuse monitoring. Both are metadata, so batch files written for the API run unchanged.
constexpr std::array<std::string_view, 2> kIgnoredBodyKeys = {"model", "user"};

// Keys the OpenAI API or common OpenAI-compatible servers define that glacier-mpi does not implement.
// Each is accepted only when it holds a value that asks for nothing (the API's default): any other value
// would change the results, so the line fails naming the key.
struct UnimplementedKey {
  std::string_view name;
  std::string_view neutral;  // JSON text of the accepted values, "" when none (only absent or null)
};
constexpr std::array<UnimplementedKey, 24> kUnimplementedKeys = {{
    // Plain lines: every row carries the sampled tokens' log-probs ("top_logprobs" asks for alternatives);
    // OpenAI bodies honour both keys as the API defines them (read_openai_logprobs).
    {"logprobs", "[false, true, 0]"},
    {"top_logprobs", "[0]"},
    {"echo", "[false]"},
    {"best_of", "[1]"},
    {"stream", "[false]"},
    {"stream_options", ""},
    {"suffix", "[\"\"]"},
    {"length_penalty", "[1]"},
    {"typical_p", "[1]"},
    {"use_beam_search", "[false]"},
    {"response_format", "[{\"type\": \"text\"}]"},
    {"tools", "[[]]"},
    {"tool_choice", "[\"none\"]"},
    {"parallel_tool_calls", ""},
    {"functions", "[[]]"},
    {"function_call", "[\"none\"]"},
    {"audio", ""},
    {"modalities", "[[\"text\"]]"},
    {"prediction", ""},
    {"reasoning_effort", ""},
    {"service_tier", ""},
    {"store", "[false]"},
    {"metadata", ""},
    {"web_search_options", ""},
}};

const UnimplementedKey* find_unimplemented(const std::string& key) {
  for (const UnimplementedKey& k : kUnimplementedKeys)
    if (k.name == key) return &k;
  return nullptr;
}

// Edit distance (insert, delete, substitute, swap neighbours) up to a small limit, for "did you mean".
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// Refuses every key of `object` that is neither honoured, nor ignored metadata, nor an unimplemented key
// at its neutral value. Runs before the values are read, so a misspelt key is named even when the line
// would otherwise run (with the default the misspelling meant to override).
void check_keys(const json& object, const std::string& prefix, const std::vector<std::string_view>& honoured,
                bool allow_ignored_metadata) {
  constexpr size_t kMaxSuggestionDistance = 2;  // "temprature", "max_token", "top-p" are one or two edits away
  for (const auto& [key, value] : object.items()) {
    if (std::find(honoured.begin(), honoured.end(), key) != honoured.end()) continue;
    if (allow_ignored_metadata && std::find(kIgnoredBodyKeys.begin(), kIgnoredBodyKeys.end(), key) != kIgnoredBodyKeys.end())
      continue;
    if (const UnimplementedKey* k = find_unimplemented(key)) {
      if (value.is_null()) continue;
      const json neutral = k->neutral.empty() ? json::array() : json::parse(k->neutral);
      if (std::find(neutral.begin(), neutral.end(), value) != neutral.end()) continue;
      std::string accepted;
      for (const json& n : neutral) accepted += (accepted.empty() ? "" : " or ") + n.dump();
      throw BadLine("\"" + prefix + key + "\": not implemented by glacier-mpi: expected it absent" +
                    (accepted.empty() ? std::string() : " or " + accepted + " (which change nothing)") + ", found " +
                    describe(value));
    }
    std::string suggestion;
    size_t best = kMaxSuggestionDistance + 1;
    for (std::string_view h : honoured) {
      if (key.size() > h.size() + kMaxSuggestionDistance) continue;  // too far apart; spares a long key the table
      const size_t d = edit_distance(key, h);
      if (d < best) {
        best = d;
        suggestion = h;
      }
    }
    std::string known;
    for (std::string_view h : honoured) known += (known.empty() ? "" : ", ") + std::string(h);
    throw BadLine("\"" + prefix + clip(key) + "\": unknown key" +
                  (suggestion.empty() ? std::string() : " (did you mean \"" + prefix + suggestion + "\"?)") +
                  ": expected one of " + known);
  }
}

const std::vector<std::string_view> kSamplingKeys = {
    "max_tokens",       "temperature",      "top_k",          "top_p",      "min_p",
    "seed",             "stop",             "n",              "repetition_penalty",
    "presence_penalty", "frequency_penalty", "min_tokens",    "ignore_eos", "stop_token_ids",
    "logit_bias",       "include_stop_str_in_output"};

std::vector<std::string_view> with_sampling(std::vector<std::string_view> keys) {
  keys.insert(keys.end(), kSamplingKeys.begin(), kSamplingKeys.end());
  return keys;
}

std::vector<std::string_view> with_keys(std::vector<std::string_view> keys, std::initializer_list<std::string_view> more) {
  keys.insert(keys.end(), more.begin(), more.end());
  return keys;
}

void read_sampling(const FieldReader& f, PromptRecord& r, bool openai) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (auto v = f.integer("max_tokens", 0, kIntMax, "an integer >= 0")) r.max_tokens = static_cast<int>(*v);
  if (openai) {
    const auto completion = f.integer("max_completion_tokens", 0, kIntMax, "an integer >= 0");
    if (completion && r.max_tokens && *completion != *r.max_tokens)
      f.fail("max_completion_tokens", "the same value as \"max_tokens\" (" + std::to_string(*r.max_tokens) + ") or no such key",
             json(*completion));
    if (completion) r.max_tokens = static_cast<int>(*completion);
  }
  // The sampler divides in float: a temperature beyond float's range would become infinite.
  r.temperature = f.number("temperature", 0.0, false, FLT_MAX, false, "a finite number >= 0");
  if (auto v = f.integer("top_k", 0, kIntMax, "an integer >= 0 (0 disables top-k)")) r.top_k = static_cast<int>(*v);
  r.top_p = f.number("top_p", 0.0, true, 1.0, false, "a number in (0, 1]");
  r.min_p = f.number("min_p", 0.0, false, 1.0, false, "a number in [0, 1]");
  r.seed = f.unsigned_integer("seed", "an integer in [0, 2^64)");
  r.stop = f.string_list("stop", openai);
  if (auto v = f.integer("n", 1, kMaxSamplesPerPrompt,
                                "an integer in 1.." + std::to_string(kMaxSamplesPerPrompt) + " (samples of the prompt)")) {
    r.n = static_cast<int>(*v);
  }
  // The ranges vLLM's SamplingParams accepts (the penalties as float, which the sampler uses).
  r.repetition_penalty = f.number("repetition_penalty", 0.0, true, FLT_MAX, false, "a finite number > 0 (1 = off)");
  r.presence_penalty = f.number("presence_penalty", -2.0, false, 2.0, false, "a number in [-2, 2]");
  r.frequency_penalty = f.number("frequency_penalty", -2.0, false, 2.0, false, "a number in [-2, 2]");
  if (auto v = f.integer("min_tokens", 0, kIntMax, "an integer >= 0")) r.min_tokens = static_cast<int>(*v);
  if (r.min_tokens && r.max_tokens && *r.min_tokens > *r.max_tokens)
    f.fail("min_tokens", "at most \"max_tokens\" (" + std::to_string(*r.max_tokens) + ")", json(*r.min_tokens));
  r.ignore_eos = f.boolean("ignore_eos");
  r.stop_token_ids = f.id_list("stop_token_ids", kMaxStopTokenIds);
  r.logit_bias = f.logit_bias("logit_bias", kMaxLogitBiasEntries);
  r.include_stop_str_in_output = f.boolean("include_stop_str_in_output");
}

const std::string kTopLogprobsExpected =
    "an integer in 0.." + std::to_string(kMaxTopLogprobs) + " (alternatives returned per generated token)";

// vLLM's extra field, on plain lines and OpenAI bodies alike.
void read_prompt_logprobs(const FieldReader& f, PromptRecord& r) {
  if (auto k = f.integer("prompt_logprobs", 0, kMaxTopLogprobs,
                         "an integer in 0.." + std::to_string(kMaxTopLogprobs) + " (alternatives returned per prompt token)"))
    r.prompt_logprobs = static_cast<int>(*k);
}

// OpenAI's log-prob keys. Completions: "logprobs": k asks for the sampled tokens' log-probs with k
// alternatives each. Chat: "logprobs": true asks for them, "top_logprobs": k for alternatives, which the
// API accepts only with "logprobs": true.
void read_openai_logprobs(const FieldReader& f, PromptRecord& r, bool chat) {
  r.top_logprobs = 0;
  if (!chat) {
    const json* v = f.find("logprobs");
    if (!v || (v->is_boolean() && !v->get<bool>())) return;
    if (v->is_boolean()) f.fail("logprobs", kTopLogprobsExpected + " or false (the completions API takes a count)", *v);
    r.top_logprobs = static_cast<int>(*f.integer("logprobs", 0, kMaxTopLogprobs, kTopLogprobsExpected));
    r.openai_logprobs = true;
    return;
  }
  r.openai_logprobs = f.boolean("logprobs").value_or(false);
  const auto k = f.integer("top_logprobs", 0, kMaxTopLogprobs, kTopLogprobsExpected);
  if (k && *k > 0 && !r.openai_logprobs)
    f.fail("top_logprobs", "no such key, or \"logprobs\": true beside it (as the chat completions API requires)", json(*k));
  if (k) r.top_logprobs = static_cast<int>(*k);
}

void read_plain_line(const json& object, PromptRecord& r) {
  FieldReader f(object, "");
  r.format = PromptFormat::Jsonl;
  if (object.contains("custom_id") && !object.contains("body"))
    f.fail_missing("body", "an object (an OpenAI batch line has \"custom_id\", \"url\" and \"body\")");
  if (const json* id = f.find("id")) {
    if (id->is_number_integer())
      r.id = id->dump();
    else if (id->is_string() && !id->get_ref<const std::string&>().empty())
      r.id = id->get<std::string>();
    else
      f.fail("id", "a non-empty string or an integer", *id);
  }
  // After the id, so that the error row of a line with a misspelt key still carries its id.
  static const std::vector<std::string_view> keys =
      with_keys(with_sampling({"id", "prompt", "prompt_token_ids", "messages", "context", "continuation", "continuations"}),
                {"top_logprobs", "prompt_logprobs"});
  check_keys(object, "", keys, false);
  const bool has_score = f.has("context") || f.has("continuation") || f.has("continuations");
  const int n_inputs = int(f.has("prompt")) + int(f.has("prompt_token_ids")) + int(f.has("messages")) + int(has_score);
  if (n_inputs == 0)
    throw BadLine("no prompt: expected one of \"prompt\", \"prompt_token_ids\", \"messages\" or "
                  "\"context\" with \"continuation\", found none of them");
  if (n_inputs > 1)
    throw BadLine("expected only one of \"prompt\", \"prompt_token_ids\", \"messages\" or \"context\" with "
                  "\"continuation\", found " + std::to_string(n_inputs));
  if (f.has("prompt")) r.prompt = f.string("prompt");
  if (const json* ids = f.find("prompt_token_ids")) r.prompt_token_ids = f.token_ids("prompt_token_ids", *ids);
  if (f.has("messages")) r.messages_json = f.messages("messages");
  if (has_score) {
    r.context = f.string("context");
    if (!r.context) f.fail_missing("context", "a string (the text the continuation is scored after)");
    if (f.has("continuation") && f.has("continuations"))
      f.fail("continuations", "no such key beside \"continuation\" (one continuation, or a list of them)",
             object["continuations"]);
    if (const json* list = f.find("continuations")) {
      static const char* expected = "a non-empty list of non-empty strings (the texts to score)";
      if (!list->is_array() || list->empty()) f.fail("continuations", expected, *list);
      std::vector<std::string> texts;
      for (size_t k = 0; k < list->size(); ++k) {
        const json& text = (*list)[k];
        if (!text.is_string() || text.get_ref<const std::string&>().empty())
          f.fail("continuations[" + std::to_string(k) + "]", "a non-empty string (the text to score)", text);
        texts.push_back(text.get<std::string>());
      }
      r.continuations = std::move(texts);
    } else {
      r.continuation = f.string("continuation", false);
      if (!r.continuation)
        f.fail_missing("continuation", "a non-empty string (the text to score), or \"continuations\": a list of them");
    }
  }
  read_sampling(f, r, false);
  if (auto k = f.integer("top_logprobs", 0, kMaxTopLogprobs, kTopLogprobsExpected)) r.top_logprobs = static_cast<int>(*k);
  read_prompt_logprobs(f, r);
}

void read_batch_line(const json& object, PromptRecord& r) {
  FieldReader top(object, "");
  r.format = PromptFormat::OpenAiBatch;
  r.custom_id = top.string("custom_id", false);
  if (!r.custom_id) top.fail_missing("custom_id", "a non-empty string");
  r.id = *r.custom_id;
  check_keys(object, "", {"custom_id", "method", "url", "body"}, false);
  if (auto method = top.string("method"); method && *method != "POST") top.fail("method", "\"POST\"", object["method"]);
  static const std::string url_expected = "\"/v1/completions\" or \"/v1/chat/completions\"";
  auto url = top.string("url");
  if (!url) top.fail_missing("url", url_expected);
  const bool chat = *url == "/v1/chat/completions";
  if (!chat && *url != "/v1/completions") top.fail("url", url_expected, object["url"]);
  const json& body = object["body"];
  if (!body.is_object()) top.fail("body", "an object", body);

  FieldReader f(body, "body.");
  static const std::vector<std::string_view> chat_keys =
      with_keys(with_sampling({"messages", "max_completion_tokens"}), {"logprobs", "top_logprobs", "prompt_logprobs"});
  static const std::vector<std::string_view> completion_keys =
      with_keys(with_sampling({"prompt"}), {"logprobs", "prompt_logprobs"});
  check_keys(body, "body.", chat ? chat_keys : completion_keys, true);
  if (chat) {
    r.messages_json = f.messages("messages");
  } else {
    static const std::string expected =
        "a string, an array of token ids, or a non-empty array of prompts (all strings, or all arrays of token ids)";
    const json* prompt = f.find("prompt");
    if (!prompt) f.fail_missing("prompt", expected);
    if (prompt->is_string()) {
      r.prompt = prompt->get<std::string>();
    } else if (!prompt->is_array() || prompt->empty()) {
      f.fail("prompt", expected, *prompt);
    } else if ((*prompt)[0].is_number()) {
      r.prompt_token_ids = f.token_ids("prompt", *prompt);
    } else {
      // A list of prompts, as OpenAI accepts: every element of the first one's kind.
      const bool strings = (*prompt)[0].is_string();
      if (!strings && !(*prompt)[0].is_array()) f.fail("prompt[0]", "a string or an array of token ids", (*prompt)[0]);
      if (prompt->size() > static_cast<size_t>(kMaxSamplesPerPrompt))
        f.fail("prompt", "at most " + std::to_string(kMaxSamplesPerPrompt) + " prompts in one request", *prompt);
      std::vector<std::string> texts;
      std::vector<std::vector<int32_t>> id_lists;
      for (size_t k = 0; k < prompt->size(); ++k) {
        const json& item = (*prompt)[k];
        const std::string key = "prompt[" + std::to_string(k) + "]";
        if (strings) {
          if (!item.is_string()) f.fail(key, "a string, as the array's first prompt is (prompts of one kind)", item);
          texts.push_back(item.get<std::string>());
        } else {
          if (!item.is_array()) f.fail(key, "an array of token ids, as the array's first prompt is (prompts of one kind)", item);
          id_lists.push_back(f.token_ids(key, item));
        }
      }
      // One element is that prompt, exactly as a string or an id list would be.
      if (strings && texts.size() == 1) r.prompt = std::move(texts[0]);
      else if (strings) r.prompt_list = std::move(texts);
      else if (id_lists.size() == 1) r.prompt_token_ids = std::move(id_lists[0]);
      else r.prompt_token_ids_list = std::move(id_lists);
    }
  }
  read_sampling(f, r, true);
  read_openai_logprobs(f, r, chat);
  read_prompt_logprobs(f, r);
  if (r.prompt_elements() > 1 && r.n && r.prompt_elements() * static_cast<size_t>(*r.n) > static_cast<size_t>(kMaxSamplesPerPrompt))
    f.fail("n", "at most " + std::to_string(kMaxSamplesPerPrompt) + " choices in all (" + std::to_string(r.prompt_elements()) +
                    " prompts x n)", json(*r.n));
}

}  // namespace

void parse_jsonl_prompt_line(const std::string& path, const std::string& line_text, PromptRecord& record) {
  const std::string where = path + ":" + std::to_string(record.line) + ": ";
  record.format = PromptFormat::Jsonl;
  try {
    json object = json::parse(line_text);
    if (!object.is_object()) throw BadLine("expected a JSON object, found " + describe(object));
    if (object.contains("custom_id") && object.contains("body"))
      read_batch_line(object, record);
    else
      read_plain_line(object, record);
  } catch (const json::parse_error& e) {
    record.ok = false;
    // nlohmann's text starts with "[json.exception.parse_error.101] parse error at line 1, column 7: ..."
    std::string what = e.what();
    size_t at = what.find("column");
    // The parser quotes the bytes it read last, which may be the invalid UTF-8 it rejected.
    record.error = replace_invalid_utf8(where + "expected a JSON object, found invalid JSON (" +
                                        (at == std::string::npos ? what : what.substr(at)) + ")");
  } catch (const json::exception& e) {
    // The parser refuses numbers past double's range ("1e999") with out_of_range, not parse_error; no
    // other JSON error may leave the line either.
    record.ok = false;
    std::string what = e.what();
    const size_t at = what.find("] ");
    record.error = replace_invalid_utf8(where + "expected a JSON object, found invalid JSON (" +
                                        (at == std::string::npos ? what : what.substr(at + 2)) + ")");
  } catch (const BadLine& e) {
    record.ok = false;
    record.error = where + e.what();
  }
  if (!record.ok) {
    record.prompt.reset();
    record.prompt_token_ids.reset();
    record.messages_json.reset();
    record.context.reset();
    record.continuation.reset();
    record.continuations.reset();
    record.prompt_list.reset();
    record.prompt_token_ids_list.reset();
  }
}

}  // namespace glacier::io
