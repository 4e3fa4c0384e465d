// One request read from a prompt file: what to run and with which sampling overrides, or why the line
// could not be used (ok == false). Plain data, shared by the reader, the dispatcher and the writers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace glacier::io {

// Sizes a prompt's stop_token_ids and logit_bias may have (the engine's per-sequence bounds; app checks
// they agree with compute/microbatch.h).
constexpr size_t kMaxStopTokenIds = 1024;
constexpr size_t kMaxLogitBiasEntries = 1024;
constexpr int kMaxTopLogprobs = 20;  // alternatives per token a line may ask for
// Samples a prompt's "n" may ask for (compute/microbatch.h's kMaxSamplesPerPrompt).
constexpr int kMaxSamplesPerPrompt = 128;

enum class PromptFormat : uint8_t { Text, Jsonl, OpenAiBatch };

const char* prompt_format_name(PromptFormat format);

struct PromptRecord {
  std::string id;       // explicit id, OpenAI custom_id, or the 1-based line number as text
  int64_t line = 0;     // 1-based line in the file
  int64_t index = 0;    // 0-based order among non-blank lines; results are written in this order
  bool ok = true;
  std::string error;    // when !ok: names the file, the line, what was expected and what was found
  PromptFormat format = PromptFormat::Text;
  std::string source_line;  // the line exactly as read (less its line ending): what --resume's digest covers

  // Exactly one of these describes the input of an ok record (context + continuation count as one).
  std::optional<std::string> prompt;
  std::optional<std::vector<int32_t>> prompt_token_ids;
  std::optional<std::string> messages_json;  // raw JSON array of {"role", "content"} for chat templates
  std::optional<std::string> context;        // score mode: log-prob of continuation given context
  std::optional<std::string> continuation;
  // Score mode, instead of `continuation`: several continuations of one context (multiple choice), each
  // scored as if on a line of its own; one result row each (its index in the `sample` column).
  std::optional<std::vector<std::string>> continuations;

  // OpenAI /v1/completions bodies whose "prompt" is an array of two or more prompts (strings, or token-id
  // lists): each element runs as its own prompt with its own n samples, and the one output line holds
  // them all (choice index = element * n + sample). One element reads as `prompt` / `prompt_token_ids`.
  std::optional<std::vector<std::string>> prompt_list;
  std::optional<std::vector<std::vector<int32_t>>> prompt_token_ids_list;

  std::optional<std::string> custom_id;  // OpenAI batch lines only, echoed in the output

  // Sampling overrides; absent means "use the command-line default".
  std::optional<int> max_tokens;
  std::optional<double> temperature;
  std::optional<int> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<uint64_t> seed;
  std::optional<std::vector<std::string>> stop;
  std::optional<double> repetition_penalty;
  std::optional<double> presence_penalty;
  std::optional<double> frequency_penalty;
  std::optional<int> min_tokens;
  std::optional<bool> ignore_eos;
  std::optional<std::vector<int32_t>> stop_token_ids;
  std::optional<std::vector<std::pair<int32_t, double>>> logit_bias;  // (token id, bias), ascending ids
  std::optional<bool> include_stop_str_in_output;
  std::optional<int> top_logprobs;  // alternatives per generated token, 0..20 (OpenAI lines always set it)
  // OpenAI batch lines: the body asked for log-probs ("logprobs": k for completions, true for chat), so the
  // output line carries them, as the API's does only when asked.
  bool openai_logprobs = false;
  // vLLM's prompt_logprobs (0..20): per prompt token after the first, its log-prob given the tokens before
  // it and the k most likely tokens there; absent asks for none.
  std::optional<int> prompt_logprobs;
  std::optional<int> n;  // samples of this prompt (plain .jsonl lines; OpenAI batch bodies only 1)

  bool is_chat() const { return messages_json.has_value(); }
  // Prompts the record holds: the elements of a prompt array, else 1.
  size_t prompt_elements() const {
    return prompt_list ? prompt_list->size() : prompt_token_ids_list ? prompt_token_ids_list->size() : 1;
  }
  bool is_score() const { return context.has_value(); }
};

}  // namespace glacier::io
