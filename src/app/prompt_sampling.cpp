// Per-prompt sampling resolution and the prompt digest --resume matches rows by.
#include "app/prompt_sampling.h"

#include "app/sha256.h"

namespace glacier::app {

PromptSampling sampling_for(const io::PromptRecord& rec, const JobOptions& opt) {
  PromptSampling s;
  s.max_tokens = rec.max_tokens ? *rec.max_tokens : opt.max_tokens;
  s.temperature = static_cast<float>(rec.temperature ? *rec.temperature : opt.temperature);
  s.top_k = rec.top_k ? *rec.top_k : opt.top_k;
  s.top_p = static_cast<float>(rec.top_p ? *rec.top_p : opt.top_p);
  s.min_p = static_cast<float>(rec.min_p ? *rec.min_p : opt.min_p);
  s.seed = rec.seed ? *rec.seed : opt.seed;
  s.stop = rec.stop ? *rec.stop : opt.stop;
  s.repetition_penalty = static_cast<float>(rec.repetition_penalty ? *rec.repetition_penalty : opt.repetition_penalty);
  s.presence_penalty = static_cast<float>(rec.presence_penalty ? *rec.presence_penalty : opt.presence_penalty);
  s.frequency_penalty = static_cast<float>(rec.frequency_penalty ? *rec.frequency_penalty : opt.frequency_penalty);
  s.min_tokens = rec.min_tokens ? *rec.min_tokens : opt.min_tokens;
  s.ignore_eos = rec.ignore_eos ? *rec.ignore_eos : opt.ignore_eos;
  s.stop_token_ids = rec.stop_token_ids ? *rec.stop_token_ids : opt.stop_token_ids;
  if (rec.logit_bias) {
    for (const auto& [id, bias] : *rec.logit_bias) s.logit_bias.emplace_back(id, static_cast<float>(bias));
  } else {
    s.logit_bias = opt.logit_bias;
  }
  s.include_stop_str_in_output = rec.include_stop_str_in_output ? *rec.include_stop_str_in_output
                                                                : opt.include_stop_str_in_output;
  s.top_logprobs = rec.top_logprobs ? *rec.top_logprobs : opt.top_logprobs;
  s.n = rec.n ? *rec.n : opt.n;
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

nlohmann::json sampling_json(const PromptSampling& s) {
  nlohmann::json bias = nlohmann::json::object();
  for (const auto& [id, b] : s.logit_bias) bias[std::to_string(id)] = b;
  nlohmann::json out = {{"max_tokens", s.max_tokens},
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
