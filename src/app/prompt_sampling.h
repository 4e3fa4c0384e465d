// The sampling settings a prompt runs with: its own fields where it has them, else the options';
// one resolution shared by the request builder and the results file (per-row record and digest).
#pragma once
#include <cstdint>
#include <string>
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
};

PromptSampling sampling_for(const io::PromptRecord& rec, const JobOptions& opt);

// {"max_tokens", "temperature", "top_k", "top_p", "min_p", "seed", "stop"}: the values as run (floats
// as the engine holds them).
nlohmann::json sampling_json(const PromptSampling& s);

// The record's sampling_json as compact text; "null" for a line that could not be read (it has none).
std::string sampling_text(const io::PromptRecord& rec, const JobOptions& opt);

// Lower-case hex SHA-256 of what decides a row's answer beyond the file-wide settings: the prompt
// line exactly as read (text, token ids, messages or context and continuation, with its fields), its
// id (it keys the random draws) and the sampling it runs with. --resume keeps a row only when the
// prompt now at its index has the same digest.
std::string prompt_digest(const io::PromptRecord& rec, const JobOptions& opt);

}  // namespace glacier::app
