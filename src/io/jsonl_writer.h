// Results as JSON lines: glacier's own line format, the OpenAI batch output format, and a writer that
// emits lines in input order however late each result arrives.
#pragma once
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "io/result_record.h"

namespace glacier::io {

// A token id's text as the tokenizer renders it alone (its raw bytes; writers repair invalid UTF-8).
using TokenText = std::function<std::string(int32_t id)>;

// {"id", "status", "prompt_tokens", "tokens", "text", "logprobs", "finish_reason", "sample"} plus "error" for
// failed requests, "sum_logprob", "greedy" for scores and, for rows that asked for top_logprobs k > 0,
// "top_logprobs": per generated token a list of k {"id", "token", "logprob"} (token_text gives "token");
// and, for rows that carry prompt log-probs, "prompt_logprobs": per prompt token null (the first) or {"id",
// "token", "logprob", "top_logprobs": k {"id", "token", "logprob"}}; ends with '\n'. Never throws on
// invalid UTF-8 in text (tokens may split a character): bad sequences
// become U+FFFD. Float log-probs are printed in the shortest form that reads back as the same float32.
std::string format_result_line(const ResultRecord& result, const TokenText& token_text = {});

// One line for a score line's `continuations` (multiple choice): {"id", "status", "prompt_tokens" (the
// context's), "continuations": [{"index", "status", "tokens", "text", "logprobs", "sum_logprob",
// "logprob_per_token", "logprob_per_byte", "greedy"} plus "error" when it failed]} plus "error" (the
// first failed continuation's) when any failed. `rows` are the continuations' rows in index order
// (their `sample`); `text_bytes[k]` is continuation k's length in UTF-8 bytes as the line gave it.
// logprob_per_token = sum_logprob / tokens; logprob_per_byte = sum_logprob / text_bytes (the length
// normalisation of lm-evaluation-harness's acc_norm); null when not finite. Ends with '\n'.
std::string format_continuations_line(const std::vector<ResultRecord>& rows, const std::vector<size_t>& text_bytes);

struct OpenAiBatchLine {
  std::string custom_id;
  int64_t request_number = 0;  // gives "batch_req_<n>", "req_<n>" and the body's "cmpl-<n>" / "chatcmpl-<n>"
  bool chat = false;           // the request went to /v1/chat/completions
  bool bad_request = false;    // the line itself could not be read (vs. a request that failed when run)
  std::string model;           // the body's "model": the model that answered
  int64_t created = 0;         // the body's "created": Unix seconds
  int64_t n = 1;               // choices per prompt: choice i answers prompt element i / n
  bool logprobs = false;       // the request asked for log-probs (only then does a choice carry them)
  // The request asked for vLLM's prompt_logprobs: each completions choice carries its prompt's (from the
  // row of its prompt element's first sample), a chat response its conversation's.
  bool prompt_logprobs = false;
  TokenText token_text;        // needed when logprobs or prompt_logprobs
};

// One line of an OpenAI batch output file: {"id", "custom_id", "response": {"status_code", "request_id",
// "body"}, "error"}. The body is a completion with one choice per result (choices[i].index = i) and the
// usage summed over them, or for a failed request OpenAI's error body ({"error": {"message", "type",
// "param", "code"}}, status 400) with "error": {"code", "message"} beside it. Ends with '\n'.
std::string format_openai_batch_line(const std::vector<ResultRecord>& choices, const OpenAiBatchLine& line);
std::string format_openai_batch_line(const ResultRecord& result, const OpenAiBatchLine& line);
void write_openai_batch_line(std::ostream& out, const ResultRecord& result, const OpenAiBatchLine& line);

// Writes lines to `path` in index order (the results sink numbers rows by prompt, then sample): a line
// whose index is ahead of the next one expected waits in memory. Indices done in an earlier run
// (resume) are declared with skip().
class OrderedLineWriter {
 public:
  explicit OrderedLineWriter(const std::string& path, bool append = false);
  ~OrderedLineWriter();
  OrderedLineWriter(const OrderedLineWriter&) = delete;
  OrderedLineWriter& operator=(const OrderedLineWriter&) = delete;

  void put(int64_t index, std::string line);
  void skip(int64_t index);
  // Writes every waiting line (in index order, across gaps) and flushes; throws on a write error.
  void finish();
  int64_t next_index() const { return next_; }
  size_t waiting() const { return pending_.size(); }

 private:
  void drain();
  void check_stream();

  std::string path_;
  std::ofstream out_;
  int64_t next_ = 0;
  std::map<int64_t, std::string> pending_;  // empty string = skipped index
};

// Convenience for whole result sets: sorts by index and writes format_result_line for each.
void write_results_jsonl(const std::string& path, std::vector<ResultRecord> results);

}  // namespace glacier::io
