// Prompt records <-> scheduler requests and outcomes. Score records put their targets on the
// continuation only: position i predicts token i + 1, counted from the context's last token.
#include "app/requests.h"

#include <algorithm>

#include "app/prompt_sampling.h"
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
  if (!opt.chat_template.empty()) {
    c.chat_template = model::parse_chat_template_name(opt.chat_template);
  } else if (!jinja) {
    c.unavailable_reason = "the model has no tokenizer.chat_template: pass --chat-template NAME (chatml, llama3, llama2, mistral, deepseek)";
  } else if (!(c.chat_template = model::detect_chat_template(*jinja))) {
    c.unavailable_reason = "unknown chat template in the model's tokenizer.chat_template: pass --chat-template NAME (chatml, llama3, llama2, mistral, deepseek)";
  }
  return c;
}

std::optional<std::string> build_request(const io::PromptRecord& rec, const JobOptions& opt,
                                         const model::Tokenizer& tok, const ChatSetup& chat, int32_t seq,
                                         pipeline::SequenceRequest& req, PromptPlan& plan) {
  plan.record = rec;
  const PromptSampling sampling = sampling_for(rec, opt);
  plan.stop = sampling.stop;
  req = {};
  req.seq = seq;
  req.prompt_key = prompt_key(rec.id);
  req.max_new_tokens = sampling.max_tokens;
  req.sampling.temperature = sampling.temperature;
  req.sampling.top_k = sampling.top_k;
  req.sampling.top_p = sampling.top_p;
  req.sampling.min_p = sampling.min_p;
  req.sampling.seed = sampling.seed;
  const bool add_special = !opt.no_bos;
  if (rec.is_chat()) {
    if (opt.mode != "generate") return "\"messages\" records need --mode generate";
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
    return std::nullopt;
  }
  if (rec.is_score()) {
    if (opt.mode != "score") return "a context/continuation record needs --mode score";
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
  if (opt.mode == "score") return "--mode score needs records with \"context\" and \"continuation\"";
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
  return std::nullopt;
}

bool ends_generation(const model::Tokenizer& tok, const PromptPlan& plan, const pipeline::SequenceOutcome& out) {
  if (tok.is_end_of_generation(out.generated.back())) return true;
  if (plan.stop.empty()) return false;
  const std::string text = tok.decode(out.generated);
  // Only a stop string that the newest token completed can be new: look near the end of the text.
  const std::string last = tok.token_to_piece(out.generated.back(), false);
  for (const std::string& s : plan.stop) {
    if (s.empty()) continue;
    const size_t from = text.size() >= s.size() + last.size() ? text.size() - s.size() - last.size() : 0;
    if (text.find(s, from) != std::string::npos) return true;
  }
  return false;
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
    r.prompt_tokens = plan.prompt_tokens;
    return r;
  }
  io::ResultRecord r;
  r.id = plan.record.id;
  r.index = plan.record.index;
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
  r.text = tok.decode(out.generated);
  r.finish_reason = out.finish == pipeline::FinishReason::Stop ? "stop" : "length";
  // A stop string ends the text where it begins (the stop string itself is not part of the output).
  for (const std::string& s : plan.stop) {
    size_t at = s.empty() ? std::string::npos : r.text.find(s);
    if (at != std::string::npos) r.text.resize(at);
  }
  return r;
}

}  // namespace glacier::app
