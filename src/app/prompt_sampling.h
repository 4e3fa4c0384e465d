// The sampling settings a prompt runs with: its own fields where it has them, else the options';
// one resolution shared by the request builder and the results file (per-row record and digest).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/options.h"
#include "io/prompt_record.h"

namespace glacier::app {

struct PromptSampling {
  int32_t max_tokens = 0;
  float temperature = 0;
  int32_t top_k = 0;
  float top_p = 1;
  float min_p = 0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  float repetition_penalty = 1;
  float presence_penalty = 0;
  float frequency_penalty = 0;
  int32_t min_tokens = 0;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::pair<int32_t, float>> logit_bias;  // ascending ids
  bool include_stop_str_in_output = false;
  int32_t top_logprobs = 0;
  int32_t prompt_logprobs = -1;  // alternatives per prompt token, -1: no prompt log-probs asked
  int32_t n = 1;  // samples
};

PromptSampling sampling_for(const io::PromptRecord& rec, const JobOptions& opt);
// Result rows the record gives: one a sample (of each element of an OpenAI prompt array), one a
// continuation of a `continuations` line, one for a line that could not be read or whose prompt array
// times n exceeds io::kMaxSamplesPerPrompt choices.
int32_t result_rows(const io::PromptRecord& rec, const JobOptions& opt);

// {"max_tokens", "temperature", "top_k", "top_p", "min_p", "seed", "stop", "repetition_penalty",
// "presence_penalty", "frequency_penalty", "min_tokens", "ignore_eos", "stop_token_ids", "logit_bias"
// ({"id": bias}), "include_stop_str_in_output", "top_logprobs", "n"} plus "prompt_logprobs" when asked: the
// values as run (floats as the engine holds them).
nlohmann::json sampling_json(const PromptSampling& s);

// The record's sampling_json as compact text; "null" for a line that could not be read (it has none).
std::string sampling_text(const io::PromptRecord& rec, const JobOptions& opt);

// Lower-case hex SHA-256 of what decides a row's answer beyond the file-wide settings: the prompt
// line exactly as read (text, token ids, messages or context and continuation, with its fields), its
// id (it keys the random draws) and the sampling it runs with. --resume keeps a row only when the
// prompt now at its index has the same digest.
std::string prompt_digest(const io::PromptRecord& rec, const JobOptions& opt);

}  // namespace glacier::app
