// Field-by-field check of OpenAI batch output lines against the documented shape.
#include "common/openai_batch_schema.h"

#include <set>

namespace glacier::testing {
namespace {

using nlohmann::json;

class Checker {
 public:
  std::vector<std::string> problems;

  // The object has exactly these keys.
  bool keys(const json& j, const std::string& where, const std::set<std::string>& names) {
    if (!j.is_object()) return fail(where, "an object", j);
    bool good = true;
    for (const auto& [k, v] : j.items())
      if (!names.count(k)) good = fail(where + "." + k, "no such key", v);
    for (const auto& k : names)
      if (!j.contains(k)) good = fail(where + "." + k, "present", json("(absent)"));
    return good;
  }
  bool string(const json& j, const std::string& where) { return j.is_string() || fail(where, "a string", j); }
  bool integer(const json& j, const std::string& where) { return j.is_number_integer() || fail(where, "an integer", j); }
  bool number(const json& j, const std::string& where) { return j.is_number() || fail(where, "a number", j); }
  bool equal(const json& j, const std::string& where, const json& value) {
    return j == value || fail(where, value.dump(), j);
  }
  bool array(const json& j, const std::string& where, size_t n) {
    if (!j.is_array()) return fail(where, "an array", j);
    return j.size() == n || fail(where, "an array of " + std::to_string(n), json(j.size()));
  }
  bool bytes_of(const json& j, const std::string& where, const json& token) {
    if (!j.is_array()) return fail(where, "an array of byte values", j);
    for (const json& b : j)
      if (!b.is_number_integer() || b.get<int>() < 0 || b.get<int>() > 255) return fail(where, "byte values 0..255", b);
    // The bytes are the token's text, unless that text had to be repaired (it then holds U+FFFD).
    std::string text;
    for (const json& b : j) text.push_back(static_cast<char>(b.get<int>()));
    if (token.is_string() && token.get<std::string>().find("\xEF\xBF\xBD") == std::string::npos &&
        token.get<std::string>() != text)
      return fail(where, "the token's UTF-8 bytes", j);
    return true;
  }
  bool fail(const std::string& where, const std::string& expected, const json& found) {
    problems.push_back(where + ": expected " + expected + ", found " + found.dump());
    return false;
  }
};

void check_completion_logprobs(Checker& c, const json& lp, const std::string& at, const OpenAiLineExpectation& e) {
  if (!c.keys(lp, at, {"tokens", "token_logprobs", "top_logprobs", "text_offset"})) return;
  if (!lp["tokens"].is_array()) {
    c.fail(at + ".tokens", "an array", lp["tokens"]);
    return;
  }
  const size_t n = lp["tokens"].size();
  for (size_t i = 0; i < n; ++i) c.string(lp["tokens"][i], at + ".tokens[" + std::to_string(i) + "]");
  if (c.array(lp["token_logprobs"], at + ".token_logprobs", n))
    for (size_t i = 0; i < n; ++i) c.number(lp["token_logprobs"][i], at + ".token_logprobs[" + std::to_string(i) + "]");
  if (c.array(lp["text_offset"], at + ".text_offset", n))
    for (size_t i = 0; i < n; ++i) {
      const json& o = lp["text_offset"][i];
      if (c.integer(o, at + ".text_offset[" + std::to_string(i) + "]") && i > 0 && o.get<int64_t>() < lp["text_offset"][i - 1].get<int64_t>())
        c.fail(at + ".text_offset[" + std::to_string(i) + "]", "non-decreasing offsets", o);
    }
  if (e.top_logprobs == 0) {
    c.equal(lp["top_logprobs"], at + ".top_logprobs", nullptr);
    return;
  }
  if (!c.array(lp["top_logprobs"], at + ".top_logprobs", n)) return;
  for (size_t i = 0; i < n; ++i) {
    const json& alternatives = lp["top_logprobs"][i];
    const std::string where = at + ".top_logprobs[" + std::to_string(i) + "]";
    if (!alternatives.is_object()) {
      c.fail(where, "an object {token: logprob}", alternatives);
      continue;
    }
    // Alternatives sharing a text collapse into one key, so there may be fewer than asked.
    if (alternatives.empty() || alternatives.size() > static_cast<size_t>(e.top_logprobs))
      c.fail(where, "1.." + std::to_string(e.top_logprobs) + " entries", json(alternatives.size()));
    for (const auto& [token, logprob] : alternatives.items()) c.number(logprob, where + "." + token);
  }
}

// vLLM's prompt_logprobs: null for the first prompt token, then per token an object of 1..k+1 entries
// "<token id>": {"logprob", "rank" (1..k or null), "decoded_token"}.
void check_prompt_logprobs(Checker& c, const json& lp, const std::string& at, int k) {
  if (!lp.is_array() || lp.empty()) {
    c.fail(at, "a non-empty array", lp);
    return;
  }
  c.equal(lp[0], at + "[0]", nullptr);
  for (size_t t = 1; t < lp.size(); ++t) {
    const std::string where = at + "[" + std::to_string(t) + "]";
    if (!lp[t].is_object() || lp[t].empty() || lp[t].size() > static_cast<size_t>(k) + 1) {
      c.fail(where, "an object of 1.." + std::to_string(k + 1) + " entries", lp[t]);
      continue;
    }
    for (const auto& [id, entry] : lp[t].items()) {
      const std::string w = where + "." + id;
      if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) c.fail(w, "a token id as key", json(id));
      if (!c.keys(entry, w, {"logprob", "rank", "decoded_token"})) continue;
      c.number(entry["logprob"], w + ".logprob");
      c.string(entry["decoded_token"], w + ".decoded_token");
      if (!entry["rank"].is_null() && !(entry["rank"].is_number_integer() && entry["rank"].get<int>() >= 1 &&
                                        entry["rank"].get<int>() <= k))
        c.fail(w + ".rank", "null or 1.." + std::to_string(k), entry["rank"]);
    }
  }
}

void check_chat_logprobs(Checker& c, const json& lp, const std::string& at, const OpenAiLineExpectation& e) {
  if (!c.keys(lp, at, {"content"})) return;
  if (!lp["content"].is_array()) {
    c.fail(at + ".content", "an array", lp["content"]);
    return;
  }
  for (size_t i = 0; i < lp["content"].size(); ++i) {
    const json& item = lp["content"][i];
    const std::string where = at + ".content[" + std::to_string(i) + "]";
    if (!c.keys(item, where, {"token", "logprob", "bytes", "top_logprobs"})) continue;
    c.string(item["token"], where + ".token");
    c.number(item["logprob"], where + ".logprob");
    c.bytes_of(item["bytes"], where + ".bytes", item["token"]);
    if (!c.array(item["top_logprobs"], where + ".top_logprobs", static_cast<size_t>(e.top_logprobs))) continue;
    for (size_t j = 0; j < item["top_logprobs"].size(); ++j) {
      const json& alt = item["top_logprobs"][j];
      const std::string w = where + ".top_logprobs[" + std::to_string(j) + "]";
      if (!c.keys(alt, w, {"token", "logprob", "bytes"})) continue;
      c.string(alt["token"], w + ".token");
      c.number(alt["logprob"], w + ".logprob");
      c.bytes_of(alt["bytes"], w + ".bytes", alt["token"]);
    }
  }
}

}  // namespace

std::vector<std::string> openai_line_problems(const json& line, const OpenAiLineExpectation& e) {
  Checker c;
  if (!c.keys(line, "line", {"id", "custom_id", "response", "error"})) return c.problems;
  if (c.string(line["id"], "line.id") && line["id"].get<std::string>().rfind("batch_req_", 0) != 0)
    c.fail("line.id", "\"batch_req_<n>\"", line["id"]);
  c.string(line["custom_id"], "line.custom_id");
  const json& response = line["response"];
  if (!c.keys(response, "response", {"status_code", "request_id", "body"})) return c.problems;
  c.string(response["request_id"], "response.request_id");
  const json& body = response["body"];
  if (!e.ok) {
    c.equal(response["status_code"], "response.status_code", 400);
    if (c.keys(line["error"], "line.error", {"code", "message"})) {
      c.string(line["error"]["code"], "line.error.code");
      c.string(line["error"]["message"], "line.error.message");
    }
    if (c.keys(body, "response.body", {"error"}) && c.keys(body["error"], "response.body.error", {"message", "type", "param", "code"})) {
      c.string(body["error"]["message"], "response.body.error.message");
      c.string(body["error"]["type"], "response.body.error.type");
      c.equal(body["error"]["param"], "response.body.error.param", nullptr);
      c.string(body["error"]["code"], "response.body.error.code");
    }
    return c.problems;
  }
  c.equal(response["status_code"], "response.status_code", 200);
  c.equal(line["error"], "line.error", nullptr);
  std::set<std::string> body_keys = {"id", "object", "created", "model", "choices", "usage"};
  if (e.chat && e.prompt_logprobs >= 0) body_keys.insert("prompt_logprobs");
  if (!c.keys(body, "response.body", body_keys)) return c.problems;
  if (e.chat && e.prompt_logprobs >= 0) check_prompt_logprobs(c, body["prompt_logprobs"], "body.prompt_logprobs", e.prompt_logprobs);
  if (c.string(body["id"], "body.id") && body["id"].get<std::string>().rfind(e.chat ? "chatcmpl-" : "cmpl-", 0) != 0)
    c.fail("body.id", e.chat ? "\"chatcmpl-<n>\"" : "\"cmpl-<n>\"", body["id"]);
  c.equal(body["object"], "body.object", e.chat ? "chat.completion" : "text_completion");
  if (c.integer(body["created"], "body.created") && body["created"].get<int64_t>() <= 0)
    c.fail("body.created", "Unix seconds > 0", body["created"]);
  c.string(body["model"], "body.model");
  int64_t completion_tokens = 0;
  if (c.array(body["choices"], "body.choices", e.choices)) {
    for (size_t i = 0; i < e.choices; ++i) {
      const json& choice = body["choices"][i];
      const std::string at = "body.choices[" + std::to_string(i) + "]";
      std::set<std::string> choice_keys = {"index", e.chat ? "message" : "text", "logprobs", "finish_reason"};
      if (!e.chat && e.prompt_logprobs >= 0) choice_keys.insert("prompt_logprobs");
      if (!c.keys(choice, at, choice_keys)) continue;
      if (!e.chat && e.prompt_logprobs >= 0)
        check_prompt_logprobs(c, choice["prompt_logprobs"], at + ".prompt_logprobs", e.prompt_logprobs);
      c.equal(choice["index"], at + ".index", i);
      if (!choice["finish_reason"].is_null()) c.string(choice["finish_reason"], at + ".finish_reason");
      if (e.chat) {
        if (c.keys(choice["message"], at + ".message", {"role", "content"})) {
          c.equal(choice["message"]["role"], at + ".message.role", "assistant");
          c.string(choice["message"]["content"], at + ".message.content");
        }
      } else {
        c.string(choice["text"], at + ".text");
      }
      if (!e.logprobs) {
        c.equal(choice["logprobs"], at + ".logprobs", nullptr);
      } else if (e.chat) {
        check_chat_logprobs(c, choice["logprobs"], at + ".logprobs", e);
        if (choice["logprobs"].contains("content") && choice["logprobs"]["content"].is_array())
          completion_tokens += static_cast<int64_t>(choice["logprobs"]["content"].size());
      } else {
        check_completion_logprobs(c, choice["logprobs"], at + ".logprobs", e);
        if (choice["logprobs"].contains("tokens") && choice["logprobs"]["tokens"].is_array())
          completion_tokens += static_cast<int64_t>(choice["logprobs"]["tokens"].size());
      }
    }
  }
  const json& usage = body["usage"];
  if (c.keys(usage, "body.usage", {"prompt_tokens", "completion_tokens", "total_tokens"}) &&
      c.integer(usage["prompt_tokens"], "body.usage.prompt_tokens") &&
      c.integer(usage["completion_tokens"], "body.usage.completion_tokens") &&
      c.integer(usage["total_tokens"], "body.usage.total_tokens")) {
    c.equal(usage["total_tokens"], "body.usage.total_tokens",
            usage["prompt_tokens"].get<int64_t>() + usage["completion_tokens"].get<int64_t>());
    if (usage["prompt_tokens"].get<int64_t>() <= 0) c.fail("body.usage.prompt_tokens", "> 0", usage["prompt_tokens"]);
    if (e.logprobs) c.equal(usage["completion_tokens"], "body.usage.completion_tokens", completion_tokens);
  }
  return c.problems;
}

}  // namespace glacier::testing
