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

struct PromptSampling : SamplingSettings {
  int32_t prompt_logprobs = -1;  // alternatives per prompt token, -1: no prompt log-probs asked
};

PromptSampling sampling_for(const io::PromptRecord& rec, const JobOptions& opt);
// Result rows the record gives: one a sample (of each element of an OpenAI prompt array), one a
// continuation of a `continuations` line, one for a line that could not be read or whose prompt array
// times n exceeds io::kMaxSamplesPerPrompt choices.
int32_t result_rows(const io::PromptRecord& rec, const JobOptions& opt);

// {"max_tokens", "temperature", "top_k", "top_p", "min_p", "seed", "stop", "repetition_penalty",
// "presence_penalty", "frequency_penalty", "min_tokens", "ignore_eos", "stop_token_ids", "logit_bias"
// ({"id": bias}), "include_stop_str_in_output", "top_logprobs", "n"}: the values as run (floats as the
// engine holds them). The job's defaults (provenance's result_settings) and a prompt's share it.
nlohmann::json sampling_settings_json(const SamplingSettings& s);
// sampling_settings_json plus "prompt_logprobs" when asked.
nlohmann::json sampling_json(const PromptSampling& s);

// The record's sampling_json as compact text; "null" for a line that could not be read (it has none).
std::string sampling_text(const io::PromptRecord& rec, const JobOptions& opt);

// Lower-case hex SHA-256 of what decides a row's answer beyond the file-wide settings: the prompt
// line exactly as read (text, token ids, messages or context and continuation, with its fields), its
// id (it keys the random draws) and the sampling it runs with. --resume keeps a row only when the
// prompt now at its index has the same digest.
std::string prompt_digest(const io::PromptRecord& rec, const JobOptions& opt);

}  // namespace glacier::app
