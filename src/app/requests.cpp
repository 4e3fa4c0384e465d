// Prompt records <-> scheduler requests and outcomes. Score records put their targets on the
// continuation only: position i predicts token i + 1, counted from the context's last token.
#include "app/requests.h"

#include <algorithm>
#include <limits>

#include "app/prompt_sampling.h"
#include "compute/top_logprobs.h"
#include "util/error.h"

namespace glacier::app {

uint64_t prompt_key(const std::string& id) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : id) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

ChatSetup choose_chat_template(const JobOptions& opt, const std::optional<std::string>& jinja) {
  ChatSetup c;
  const std::string pass_one = std::string(": pass --chat-template NAME (") + model::chat_template_names() + ")";
  if (opt.chat_template) {
    c.chat_template = opt.chat_template;
  } else if (!jinja) {
    c.unavailable_reason = "the model has no tokenizer.chat_template" + pass_one;
  } else if (!(c.chat_template = model::detect_chat_template(*jinja))) {
    c.unavailable_reason = "unknown chat template in the model's tokenizer.chat_template" + pass_one;
  }
  return c;
}

namespace {

static_assert(io::kMaxLogitBiasEntries == static_cast<size_t>(compute::kMaxLogitBiasEntries) &&
                  io::kMaxStopTokenIds == static_cast<size_t>(compute::kMaxStopTokenIds) &&
                  io::kMaxTopLogprobs == compute::kMaxTopLogprobs &&
                  io::kMaxSamplesPerPrompt == compute::kMaxSamplesPerPrompt,
              "the prompt reader's bounds are the engine's");

// The ids a prompt names must be in the model's vocabulary; the message names the prompt's key, or the
// option when the ids came from the command line.
std::optional<std::string> check_ids(const std::vector<int32_t>& ids, const model::Tokenizer& tok, bool from_line,
                                     const char* key, const char* option) {
  for (int32_t id : ids)
    if (id >= tok.n_vocab())
      return std::string(from_line ? key : option) + ": expected token ids in 0.." + std::to_string(tok.n_vocab() - 1) +
             " (the model's vocabulary), found " + std::to_string(id);
  return std::nullopt;
}

// Penalties, logit_bias, min_tokens and its mask: what the last stage applies to the sequence's logits.
std::optional<std::string> set_sequence_controls(const io::PromptRecord& rec, const PromptSampling& s,
                                                 const model::Tokenizer& tok, pipeline::SequenceRequest& req) {
  req.sampling.repetition_penalty = s.repetition_penalty;
  req.sampling.presence_penalty = s.presence_penalty;
  req.sampling.frequency_penalty = s.frequency_penalty;
  req.sampling.min_tokens = s.min_tokens;
  if (s.min_tokens > s.max_tokens)
    return "min_tokens " + std::to_string(s.min_tokens) + ": expected at most max_tokens (" + std::to_string(s.max_tokens) +
           (rec.max_tokens ? ")" : ", from --max-tokens)");
  if (auto err = check_ids(s.stop_token_ids, tok, rec.stop_token_ids.has_value(), "stop_token_ids", "--stop-token-ids"))
    return err;
  std::vector<int32_t> bias_ids;
  for (const auto& [id, bias] : s.logit_bias) {
    bias_ids.push_back(id);
    req.logit_bias.push_back({id, bias});
  }
  if (auto err = check_ids(bias_ids, tok, rec.logit_bias.has_value(), "logit_bias", "--logit-bias")) return err;
  if (s.min_tokens > 0) {
    // vLLM's set: the stop token ids, and the end-of-generation ids unless they are ignored anyway.
    req.min_tokens_mask = s.stop_token_ids;
    if (!s.ignore_eos)
      for (int32_t id = 0; id < tok.n_vocab(); ++id)
        if (tok.is_end_of_generation(id) && std::find(s.stop_token_ids.begin(), s.stop_token_ids.end(), id) == s.stop_token_ids.end())
          req.min_tokens_mask.push_back(id);
    if (req.min_tokens_mask.size() > static_cast<size_t>(compute::kMaxMinTokensMask))
      return "min_tokens: the stop token ids and the model's end-of-generation ids make " +
             std::to_string(req.min_tokens_mask.size()) + " ids to mask, expected at most " +
             std::to_string(compute::kMaxMinTokensMask);
    if (static_cast<int64_t>(req.min_tokens_mask.size()) >= tok.n_vocab())
      return "min_tokens: the stop token ids and end-of-generation ids cover the whole vocabulary, so no token could be sampled";
  }
  return std::nullopt;
}

// Prompt log-probs: every prompt position but the last predicts the next prompt token (scored on the
// last stage as --mode score scores). The scheduler then computes the whole prompt in this sequence.
std::optional<std::string> set_prompt_targets(const PromptPlan& plan, pipeline::SequenceRequest& req) {
  if (plan.prompt_logprobs < 0) return std::nullopt;
  if (req.max_new_tokens == 0)
    return "prompt_logprobs " + std::to_string(plan.prompt_logprobs) +
           ": expected max_tokens >= 1 beside it (a prompt with nothing to generate is not run)";
  req.prompt_top = plan.prompt_logprobs;
  req.targets.assign(req.tokens.size(), -1);
  for (size_t i = 0; i + 1 < req.tokens.size(); ++i) req.targets[i] = req.tokens[i + 1];
  return std::nullopt;
}

}  // namespace

std::optional<std::string> build_request(const io::PromptRecord& rec, const JobOptions& opt,
                                         const model::Tokenizer& tok, const ChatSetup& chat, int32_t seq,
                                         pipeline::SequenceRequest& req, PromptPlan& plan) {
  plan.record = rec;
  const PromptSampling sampling = sampling_for(rec, opt);
  plan.n_samples = sampling.n;
  plan.stop = sampling.stop;
  plan.include_stop_str = sampling.include_stop_str_in_output;
  plan.stop_token_ids = sampling.stop_token_ids;
  plan.ignore_eos = sampling.ignore_eos;
  plan.min_tokens = sampling.min_tokens;
  plan.top_logprobs = std::min(sampling.top_logprobs, tok.n_vocab());
  plan.prompt_logprobs = sampling.prompt_logprobs < 0 ? -1 : std::min(sampling.prompt_logprobs, tok.n_vocab());
  req = {};
  req.seq = seq;
  req.prompt_key = prompt_key(rec.id);
  req.max_new_tokens = sampling.max_tokens;
  req.sampling.temperature = sampling.temperature;
  req.sampling.top_k = sampling.top_k;
  req.sampling.top_p = sampling.top_p;
  req.sampling.min_p = sampling.min_p;
  req.sampling.seed = sampling.seed;
  req.sampling.top_logprobs = plan.top_logprobs;
  req.n_samples = sampling.n;
  if (auto err = set_sequence_controls(rec, sampling, tok, req)) return err;
  const bool add_special = !opt.no_bos;
  if (rec.is_chat()) {
    if (opt.mode != JobMode::Generate) return "\"messages\" records need --mode generate";
    if (!chat.chat_template) return chat.unavailable_reason;
    std::string text;
    try {
      const std::string bos = tok.bos() >= 0 ? tok.token_text(tok.bos()) : std::string();
      text = model::render_chat(*chat.chat_template, model::parse_chat_messages(*rec.messages_json), bos);
    } catch (const InputError& e) {
      return std::string("messages: ") + e.what();
    }
    // The rendered text carries its own BOS and control tokens (e.g. <|im_start|>): parse them as such.
    req.tokens = tok.encode(text, false, true);
    if (req.tokens.empty()) return "the chat template rendered an empty prompt";
    plan.n_prompt = static_cast<int32_t>(req.tokens.size());
    plan.prompt_tokens = req.tokens;
    return set_prompt_targets(plan, req);
  }
  if (rec.is_score()) {
    if (opt.mode != JobMode::Score) return "a context/continuation record needs --mode score";
    if (sampling.prompt_logprobs >= 0)
      return "prompt_logprobs " + std::to_string(sampling.prompt_logprobs) +
             ": expected no such key on a context/continuation record (--mode score returns the continuation's log-probs)";
    if (sampling.top_logprobs > 0)
      return std::string("top_logprobs ") + std::to_string(sampling.top_logprobs) +
             (rec.top_logprobs ? "" : " (from --top-logprobs)") +
             ": expected 0 for a context/continuation record (alternatives are returned for generated tokens only)";
    req.mode = pipeline::SeqMode::Score;
    // As evaluation harnesses do: tokenize context + continuation as one text and take the tokens past
    // the context's own tokenization as the continuation (so a leading space joins its word, and no
    // dummy-prefix space is invented at the boundary).
    const std::vector<int32_t> context = tok.encode(*rec.context, add_special, false);
    req.tokens = tok.encode(*rec.context + *rec.continuation, add_special, false);
    size_t n_context = 0;
    while (n_context < context.size() && n_context < req.tokens.size() && context[n_context] == req.tokens[n_context])
      ++n_context;
    if (n_context == 0) return "the context tokenizes to nothing, so the continuation's first token has no position to be predicted from";
    plan.continuation.assign(req.tokens.begin() + static_cast<std::ptrdiff_t>(n_context), req.tokens.end());
    req.tokens.resize(n_context);
    if (plan.continuation.empty()) return "the continuation tokenizes to nothing";
    plan.n_prompt = static_cast<int32_t>(req.tokens.size());
    req.tokens.insert(req.tokens.end(), plan.continuation.begin(), plan.continuation.end());
    req.targets.assign(req.tokens.size(), -1);
    for (size_t i = plan.n_prompt - 1; i + 1 < req.tokens.size(); ++i) req.targets[i] = req.tokens[i + 1];
    req.tokens.pop_back();  // the last continuation token is only predicted, never fed
    req.targets.pop_back();
    plan.prompt_tokens.assign(req.tokens.begin(), req.tokens.begin() + plan.n_prompt);
    return std::nullopt;
  }
  if (opt.mode == JobMode::Score) return "--mode score needs records with \"context\" and \"continuation\"";
  if (rec.prompt_token_ids) {
    req.tokens = *rec.prompt_token_ids;
    for (int32_t id : req.tokens)
      if (id < 0 || id >= tok.n_vocab())
        return "prompt_token_ids: expected ids in 0.." + std::to_string(tok.n_vocab() - 1) + ", found " + std::to_string(id);
  } else {
    req.tokens = tok.encode(rec.prompt ? *rec.prompt : std::string(), add_special, false);
  }
  if (req.tokens.empty()) return "the prompt is empty and the model adds no BOS token, so there is nothing to start from";
  plan.n_prompt = static_cast<int32_t>(req.tokens.size());
  plan.prompt_tokens = req.tokens;
  return set_prompt_targets(plan, req);
}

namespace {

// The stop string the newest token completed: where it starts in `text` (the decoded output) and its
// length; the earliest when several end there. A stop string seen before min_tokens did not end the row,
// so only one that ends inside the newest token's piece counts.
std::optional<std::pair<size_t, size_t>> completed_stop_string(const model::Tokenizer& tok, const PromptPlan& plan,
                                                               const std::vector<int32_t>& generated,
                                                               const std::string& text) {
  const std::string last = tok.token_to_piece(generated.back(), false);
  const size_t last_starts = text.size() >= last.size() ? text.size() - last.size() : 0;
  std::optional<std::pair<size_t, size_t>> found;
  for (const std::string& s : plan.stop) {
    if (s.empty()) continue;
    const size_t from = last_starts >= s.size() ? last_starts - s.size() : 0;
    for (size_t at = text.find(s, from); at != std::string::npos; at = text.find(s, at + 1)) {
      if (at + s.size() <= last_starts) continue;  // ends before the newest token
      if (!found || at < found->first) found = std::make_pair(at, s.size());
      break;
    }
  }
  return found;
}

}  // namespace

bool ends_generation(const model::Tokenizer& tok, const PromptPlan& plan, const pipeline::SequenceOutcome& out) {
  if (static_cast<int64_t>(out.generated.size()) < plan.min_tokens) return false;
  const int32_t newest = out.generated.back();
  if (!plan.ignore_eos && tok.is_end_of_generation(newest)) return true;
  if (std::find(plan.stop_token_ids.begin(), plan.stop_token_ids.end(), newest) != plan.stop_token_ids.end()) return true;
  if (plan.stop.empty()) return false;
  return completed_stop_string(tok, plan, out.generated, tok.decode(out.generated)).has_value();
}

io::ResultRecord make_error_result(const io::PromptRecord& rec, const std::string& message) {
  io::ResultRecord r;
  r.id = rec.id;
  r.index = rec.index;
  r.status = "error";
  r.error = message;
  r.finish_reason = "error";
  return r;
}

io::ResultRecord make_result(const model::Tokenizer& tok, const PromptPlan& plan, const pipeline::SequenceOutcome& out) {
  if (out.finish == pipeline::FinishReason::Error) {
    io::ResultRecord r = make_error_result(plan.record, out.error);
    r.sample = out.sample;
    r.prompt_tokens = plan.prompt_tokens;
    return r;
  }
  io::ResultRecord r;
  r.id = plan.record.id;
  r.index = plan.record.index;
  r.sample = out.sample;
  r.prompt_tokens = plan.prompt_tokens;
  r.time_to_first_token_s = out.time_to_first_token;
  r.total_time_s = out.total_time;
  if (!plan.continuation.empty()) {
    r.score = true;
    r.tokens = plan.continuation;
    r.logprobs = out.target_logprobs;
    r.text = tok.decode(plan.continuation);
    r.greedy = std::all_of(out.target_greedy.begin(), out.target_greedy.end(), [](uint8_t g) { return g != 0; });
    for (float lp : out.target_logprobs) r.sum_logprob += lp;
    r.finish_reason = "length";
    return r;
  }
  r.tokens = out.generated;
  r.logprobs = out.logprobs;
  r.top_logprobs = plan.top_logprobs;
  r.top_ids = out.top_ids;
  r.top_values = out.top_logprobs;
  GLACIER_ASSERT(r.top_ids.size() == r.tokens.size() * static_cast<size_t>(r.top_logprobs),
                 "top_logprobs alternatives for every generated token");
  r.text = tok.decode(out.generated);
  r.finish_reason = out.finish == pipeline::FinishReason::Stop ? "stop" : "length";
  // The prompt's log-probs belong to the prompt: on its first sample's row (the one that computed them).
  if (plan.prompt_logprobs >= 0 && out.sample % plan.n_samples == 0) {
    const auto k = static_cast<size_t>(plan.prompt_logprobs);
    GLACIER_ASSERT(out.target_logprobs.size() + 1 == plan.prompt_tokens.size() &&
                       out.target_top_ids.size() == out.target_logprobs.size() * k,
                   "a log-prob and prompt_logprobs alternatives for every prompt token after the first");
    r.prompt_logprobs = plan.prompt_logprobs;
    // The first token follows nothing: the "no value" markers in its place.
    r.prompt_logprob_values.assign(1, std::numeric_limits<float>::quiet_NaN());
    r.prompt_logprob_values.insert(r.prompt_logprob_values.end(), out.target_logprobs.begin(), out.target_logprobs.end());
    r.prompt_top_ids.assign(k, io::kNoTokenId);
    r.prompt_top_ids.insert(r.prompt_top_ids.end(), out.target_top_ids.begin(), out.target_top_ids.end());
    r.prompt_top_values.assign(k, std::numeric_limits<float>::quiet_NaN());
    r.prompt_top_values.insert(r.prompt_top_values.end(), out.target_top_logprobs.begin(), out.target_top_logprobs.end());
  }
  // A stop string ends the text where it begins, or with include_stop_str_in_output where it ends
  // (either way, text the same token brought after it is dropped). Tokens are kept whole.
  const int32_t newest = out.generated.empty() ? -1 : out.generated.back();
  const bool stopped_by_token =
      newest >= 0 && ((!plan.ignore_eos && tok.is_end_of_generation(newest)) ||
                      std::find(plan.stop_token_ids.begin(), plan.stop_token_ids.end(), newest) != plan.stop_token_ids.end());
  if (out.finish == pipeline::FinishReason::Stop && !stopped_by_token)
    if (auto stop = completed_stop_string(tok, plan, out.generated, r.text))
      r.text.resize(stop->first + (plan.include_stop_str ? stop->second : 0));
  return r;
}

}  // namespace glacier::app
