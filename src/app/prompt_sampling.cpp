// Per-prompt sampling resolution and the prompt digest --resume matches rows by.
#include "app/prompt_sampling.h"

#include "app/sha256.h"

namespace glacier::app {

PromptSampling sampling_for(const io::PromptRecord& rec, const JobOptions& opt) {
  PromptSampling s;
  static_cast<SamplingSettings&>(s) = opt;
  if (rec.max_tokens) s.max_tokens = *rec.max_tokens;
  if (rec.temperature) s.temperature = static_cast<float>(*rec.temperature);
  if (rec.top_k) s.top_k = *rec.top_k;
  if (rec.top_p) s.top_p = static_cast<float>(*rec.top_p);
  if (rec.min_p) s.min_p = static_cast<float>(*rec.min_p);
  if (rec.seed) s.seed = *rec.seed;
  if (rec.stop) s.stop = *rec.stop;
  if (rec.repetition_penalty) s.repetition_penalty = static_cast<float>(*rec.repetition_penalty);
  if (rec.presence_penalty) s.presence_penalty = static_cast<float>(*rec.presence_penalty);
  if (rec.frequency_penalty) s.frequency_penalty = static_cast<float>(*rec.frequency_penalty);
  if (rec.min_tokens) s.min_tokens = *rec.min_tokens;
  if (rec.ignore_eos) s.ignore_eos = *rec.ignore_eos;
  if (rec.stop_token_ids) s.stop_token_ids = *rec.stop_token_ids;
  if (rec.logit_bias) {
    s.logit_bias.clear();
    for (const auto& [id, bias] : *rec.logit_bias) s.logit_bias.emplace_back(id, static_cast<float>(bias));
  }
  if (rec.include_stop_str_in_output) s.include_stop_str_in_output = *rec.include_stop_str_in_output;
  if (rec.top_logprobs) s.top_logprobs = *rec.top_logprobs;
  if (rec.n) s.n = *rec.n;
  s.prompt_logprobs = rec.prompt_logprobs.value_or(-1);
  return s;
}

int32_t result_rows(const io::PromptRecord& rec, const JobOptions& opt) {
  if (!rec.ok) return 1;
  if (rec.continuations) return static_cast<int32_t>(rec.continuations->size());
  const auto rows = static_cast<int64_t>(rec.prompt_elements()) * sampling_for(rec, opt).n;
  // A prompt array whose choices outnumber a line's bound (n from --n) fails as one error row.
  return rows > io::kMaxSamplesPerPrompt ? 1 : static_cast<int32_t>(rows);
}

nlohmann::json sampling_settings_json(const SamplingSettings& s) {
  nlohmann::json bias = nlohmann::json::object();
  for (const auto& [id, b] : s.logit_bias) bias[std::to_string(id)] = b;
  return {{"max_tokens", s.max_tokens},
          {"temperature", s.temperature},
          {"top_k", s.top_k},
          {"top_p", s.top_p},
          {"min_p", s.min_p},
          {"seed", s.seed},
          {"stop", s.stop},
          {"repetition_penalty", s.repetition_penalty},
          {"presence_penalty", s.presence_penalty},
          {"frequency_penalty", s.frequency_penalty},
          {"min_tokens", s.min_tokens},
          {"ignore_eos", s.ignore_eos},
          {"stop_token_ids", s.stop_token_ids},
          {"logit_bias", bias},
          {"include_stop_str_in_output", s.include_stop_str_in_output},
          {"top_logprobs", s.top_logprobs},
          {"n", s.n}};
}

nlohmann::json sampling_json(const PromptSampling& s) {
  nlohmann::json out = sampling_settings_json(s);
  // Only when asked, so the digests of lines without it (and --resume of their rows) stay as they were.
  if (s.prompt_logprobs >= 0) out["prompt_logprobs"] = s.prompt_logprobs;
  return out;
}

std::string sampling_text(const io::PromptRecord& rec, const JobOptions& opt) {
  if (!rec.ok) return "null";
  return sampling_json(sampling_for(rec, opt)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string prompt_digest(const io::PromptRecord& rec, const JobOptions& opt) {
  // Length-prefixed fields, so no two different inputs can join into the same byte string.
  std::string message = "glacier prompt digest v1";
  auto field = [&message](const std::string& name, const std::string& value) {
    message += '\n' + name + ' ' + std::to_string(value.size()) + ':' + value;
  };
  field("format", io::prompt_format_name(rec.format));
  field("id", rec.id);
  field("line", rec.source_line);
  // A bad line has no sampling of its own; its row is the error, which depends on the line alone.
  field("sampling", sampling_text(rec, opt));
  return sha256_hex(message);
}

}  // namespace glacier::app
