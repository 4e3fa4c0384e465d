// The public Engine (include/glacier/engine.h) on the job's own parts: the model is loaded as one
// stage with every layer, requests pass the prompt-file reader's checks, and the scheduler runs them
// through an in-process ring, as a one-rank glacier_mpi job does.
#include "glacier/engine.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "app/local_model.h"
#include "app/options.h"
#include "app/requests.h"
#include "compute/transformer_stage.h"
#include "gguf/gguf_file.h"
#include "io/prompt_reader.h"
#include "io/prompt_record.h"
#include "io/result_record.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/tokenizer.h"
#include "pipeline/local_ring.h"
#include "pipeline/scheduler.h"
#include "sys/binding.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace glacier {
namespace {

constexpr int kDefaultMaxContext = 4096;  // as glacier_mpi: a longer context must be asked for
// What request errors name as their "file": requests have no file, their number stands for the line.
constexpr const char* kRequestsSource = "request";

void check_option(const char* name, int value, int lo, int hi) {
  if (value < lo || value > hi)
    throw Error(std::string("EngineOptions::") + name + ": expected " + std::to_string(lo) + ".." + std::to_string(hi) +
                ", found " + std::to_string(value));
}

// The request as a prompt-file line, so it meets exactly the checks and defaults a file's line does.
std::string request_line(const Request& r) {
  nlohmann::json j = nlohmann::json::object();
  if (!r.id.empty()) j["id"] = r.id;
  if (r.prompt) j["prompt"] = *r.prompt;
  if (r.prompt_tokens) j["prompt_token_ids"] = *r.prompt_tokens;
  if (r.messages) {
    nlohmann::json messages = nlohmann::json::array();
    for (const ChatMessage& m : *r.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
    j["messages"] = std::move(messages);
  }
  if (r.context) j["context"] = *r.context;
  if (r.continuation) j["continuation"] = *r.continuation;
  if (r.max_tokens) j["max_tokens"] = *r.max_tokens;
  if (r.temperature) j["temperature"] = *r.temperature;
  if (r.top_k) j["top_k"] = *r.top_k;
  if (r.top_p) j["top_p"] = *r.top_p;
  if (r.min_p) j["min_p"] = *r.min_p;
  if (r.seed) j["seed"] = *r.seed;
  if (r.stop) j["stop"] = *r.stop;
  if (r.n) j["n"] = *r.n;
  if (r.top_logprobs) j["top_logprobs"] = *r.top_logprobs;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool has_typed_fields(const Request& r) {
  return r.prompt || r.prompt_tokens || r.messages || r.context || r.continuation || r.max_tokens || r.temperature ||
         r.top_k || r.top_p || r.min_p || r.seed || r.stop || r.n || r.top_logprobs || !r.id.empty();
}

io::PromptRecord read_request(const Request& r, size_t index) {
  io::PromptRecord rec;
  rec.line = static_cast<int64_t>(index) + 1;
  rec.index = static_cast<int64_t>(index);
  rec.id = std::to_string(rec.line);
  rec.format = io::PromptFormat::Jsonl;
  if (!r.json.empty() && has_typed_fields(r)) {
    rec.ok = false;
    rec.error = std::string(kRequestsSource) + ":" + std::to_string(rec.line) +
                ": Request::json: expected either a JSON line or the typed fields, found both";
    return rec;
  }
  io::parse_jsonl_prompt_line(kRequestsSource, r.json.empty() ? request_line(r) : r.json, rec);
  if (rec.ok && rec.continuations) {
    rec.ok = false;
    rec.error = std::string(kRequestsSource) + ":" + std::to_string(rec.line) +
                ": field \"continuations\": not taken by the library API; send one request a continuation (they "
                "share the context's KV through prefix sharing)";
  }
  return rec;
}

Result to_result(io::ResultRecord&& r) {
  Result out;
  out.id = std::move(r.id);
  out.index = static_cast<size_t>(r.index);
  out.sample = static_cast<int>(r.sample);
  out.ok = r.status == "ok";
  out.error = std::move(r.error);
  out.prompt_tokens = std::move(r.prompt_tokens);
  out.tokens = std::move(r.tokens);
  out.text = std::move(r.text);
  out.logprobs = std::move(r.logprobs);
  out.top_logprobs = r.top_logprobs;
  out.top_ids = std::move(r.top_ids);
  out.top_values = std::move(r.top_values);
  out.finish_reason = std::move(r.finish_reason);
  out.sum_logprob = r.sum_logprob;
  out.greedy = r.greedy;
  return out;
}

}  // namespace

struct Engine::Impl : app::LocalModel {
  EngineOptions options;
  app::ChatSetup chat;
  // The job options a request's unset fields default to, one per mode a request may run in.
  app::JobOptions generate_defaults;
  app::JobOptions score_defaults;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::open(const std::string& model_path, const EngineOptions& options) {
  check_option("threads", options.threads, 0, app::kMaxThreads);
  check_option("context", options.context, 0, app::kMaxCtx);
  check_option("slots", options.slots, 1, app::kMaxSlots);
  check_option("ubatch", options.ubatch, 1, app::kMaxCtx);
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  try {
    impl->open(model_path, options.threads > 0 ? options.threads : sys::host_hardware_thread_count());
    const int32_t n_ctx = options.context > 0 ? options.context : std::min(impl->cfg.n_ctx_train, kDefaultMaxContext);
    impl->load(n_ctx, options.slots, std::min(options.ubatch, n_ctx));
    impl->generate_defaults.model = model_path;
    impl->generate_defaults.prompts = kRequestsSource;
    impl->generate_defaults.ctx = impl->n_ctx;
    impl->generate_defaults.slots = options.slots;
    impl->generate_defaults.ubatch = options.ubatch;
    impl->generate_defaults.prefix_sharing = options.prefix_sharing;
    impl->score_defaults = impl->generate_defaults;
    impl->score_defaults.mode = app::JobMode::Score;
    impl->chat = app::choose_chat_template(impl->generate_defaults, impl->file->find_string("tokenizer.chat_template"));
  } catch (const InputError& e) {
    throw Error(e.what());
  }
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

void Engine::run(const std::vector<Request>& requests, const std::function<void(Result&&)>& on_result) {
  Impl& m = *impl_;
  pipeline::SchedulerOptions sopt;
  sopt.n_slots = m.options.slots;
  sopt.n_ctx = m.n_ctx;
  sopt.ubatch = std::min(m.options.ubatch, m.n_ctx);
  sopt.max_in_flight = 1;  // one in-process stage computes each micro-batch as it is submitted
  sopt.decode_groups = 1;
  sopt.share_prompt = true;
  sopt.prefix_sharing = m.options.prefix_sharing;
  pipeline::LocalRing ring(*m.stage, sopt.max_in_flight);

  std::vector<app::PromptPlan> plans(requests.size());
  pipeline::Scheduler sched(
      sopt, ring,
      [&](const pipeline::SequenceOutcome& out) {
        return app::ends_generation(*m.tok, plans[static_cast<size_t>(out.seq)], out);
      },
      [&](pipeline::SequenceOutcome&& out) {
        on_result(to_result(app::make_result(*m.tok, plans[static_cast<size_t>(out.seq)], out)));
      });
  // Requests are read and queued a slot's worth ahead of the scheduler, as the job's driver does, so a
  // large batch is not tokenized (and held) all at once.
  size_t next = 0;
  auto refill = [&] {
    while (next < requests.size() && sched.queued() < static_cast<size_t>(sopt.n_slots)) {
      const size_t i = next++;
      const io::PromptRecord rec = read_request(requests[i], i);
      if (!rec.ok) {
        on_result(to_result(app::make_error_result(rec, rec.error)));
        continue;
      }
      const app::JobOptions& defaults = rec.is_score() ? m.score_defaults : m.generate_defaults;
      pipeline::SequenceRequest req;
      if (auto err = app::build_request(rec, defaults, *m.tok, m.chat, static_cast<int32_t>(i), req, plans[i])) {
        const std::string message = std::string(kRequestsSource) + ":" + std::to_string(rec.line) + ": " + *err;
        for (int32_t s = 0; s < plans[i].n_samples; ++s) {
          io::ResultRecord row = app::make_error_result(rec, message);
          row.sample = s;
          on_result(to_result(std::move(row)));
        }
        continue;
      }
      sched.add(std::move(req));
    }
  };
  sched.set_drain_check([&] {
    refill();
    return false;
  });
  for (;;) {
    refill();
    if (sched.queued() == 0) break;  // run() returns once nothing is queued or in flight
    sched.run();
  }
}

ModelInfo Engine::info() const {
  ModelInfo info;
  info.architecture = impl_->cfg.arch;
  info.n_layer = impl_->cfg.n_layer;
  info.n_vocab = impl_->cfg.n_vocab;
  info.n_embd = impl_->cfg.n_embd;
  info.context = impl_->n_ctx;
  return info;
}

std::vector<int32_t> Engine::tokenize(const std::string& text, bool add_special) const {
  return impl_->tok->encode(text, add_special, false);
}

std::string Engine::detokenize(const std::vector<int32_t>& tokens) const { return impl_->tok->decode(tokens); }

}  // namespace glacier
