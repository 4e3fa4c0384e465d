// Turns prompt records into the scheduler's sequence requests (tokenizing, applying per-prompt
// overrides of the sampling options) and finished sequences back into result records.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/options.h"
#include "io/prompt_record.h"
#include "io/result_record.h"
#include "model/chat_template.h"
#include "model/tokenizer.h"
#include "pipeline/scheduler.h"

namespace glacier::app {

// Per-sequence facts the driver keeps beside the scheduler (what the result record needs).
struct PromptPlan {
  io::PromptRecord record;
  std::vector<std::string> stop;  // stop strings
  bool include_stop_str = false;  // a stop string that ends the row stays in its text
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t min_tokens = 0;         // nothing ends the row before this many tokens
  int32_t top_logprobs = 0;       // alternatives per generated token (at most the vocabulary's size)
  int32_t prompt_logprobs = -1;   // alternatives per prompt token (at most the vocabulary's size); -1: none asked
  int32_t n_prompt = 0;           // tokens of the prompt (score: of the context)
  std::vector<int32_t> continuation;  // score mode: the continuation's tokens
  std::vector<int32_t> prompt_tokens;
  int32_t n_samples = 1;          // result rows the prompt gives (one a sample)
};

// How "messages" prompts become text: the template from --chat-template or recognized from the
// model's tokenizer.chat_template (nullopt with a reason when neither gives one).
struct ChatSetup {
  std::optional<model::ChatTemplate> chat_template;
  std::string unavailable_reason;
};
ChatSetup choose_chat_template(const JobOptions& opt, const std::optional<std::string>& model_template_jinja);

// Builds the request for a valid record; returns an error message instead when the record cannot run
// (a token id outside the vocabulary, a score record in generate mode, ...).
std::optional<std::string> build_request(const io::PromptRecord& rec, const JobOptions& opt,
                                         const model::Tokenizer& tok, const ChatSetup& chat, int32_t seq,
                                         pipeline::SequenceRequest& req, PromptPlan& plan);

// A stable 64-bit key of the prompt id (FNV-1a): the random generator's per-prompt key.
uint64_t prompt_key(const std::string& id);

// True when the newest token ends generation: an end-of-generation token (unless ignore_eos), a stop
// token id or a stop string, once the row has min_tokens tokens (vLLM checks no stop before that).
bool ends_generation(const model::Tokenizer& tok, const PromptPlan& plan, const pipeline::SequenceOutcome& out);

io::ResultRecord make_result(const model::Tokenizer& tok, const PromptPlan& plan, const pipeline::SequenceOutcome& out);
io::ResultRecord make_error_result(const io::PromptRecord& rec, const std::string& message);

}  // namespace glacier::app
