// The job on one rank: model and prompts in, the scheduler over a ring of stages, results out in
// input order. Bad prompts become error rows and never reach the ring.
#include "app/job.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/perplexity.h"
#include "app/requests.h"
#include "compute/transformer_stage.h"
#include "gguf/gguf_file.h"
#include "io/jsonl_writer.h"
#include "io/prompt_reader.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/tokenizer.h"
#include "pipeline/local_ring.h"
#include "pipeline/scheduler.h"
#include "util/error.h"
#include "util/log.h"

namespace glacier::app {
namespace {

constexpr int32_t kDefaultMaxCtx = 4096;  // a user's longer context must be asked for with --ctx
constexpr int32_t kDefaultSlots = 32;     // enough sequences in flight for batched decode

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open the text file for reading");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void check_output_writable(const std::string& path) {
  if (path.empty()) return;
  std::ofstream out(path, std::ios::app);
  if (!out) throw InputError(path + ": cannot write the output file (check that the folder exists and is writable)");
}

int32_t choose_ctx(const JobOptions& o, const model::ModelConfig& cfg) {
  if (o.ctx > 0) return o.ctx;
  return std::min(cfg.n_ctx_train, kDefaultMaxCtx);
}

int choose_threads(const JobOptions& o) {
  if (o.threads > 0) return o.threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

int run_job(const JobOptions& o) {
  check_output_writable(o.jsonl_out);
  auto file = gguf::File::open(o.model);
  const model::ModelConfig cfg = model::read_model_config(*file);
  auto tok = model::Tokenizer::from_gguf(*file);
  const int32_t n_ctx = choose_ctx(o, cfg);
  const int32_t n_slots = o.slots > 0 ? o.slots : kDefaultSlots;
  ThreadPool pool(choose_threads(o));
  model::ShardWeights shard = model::load_shard(*file, cfg, {0, cfg.n_layer}, true, true);
  GLACIER_LOG_INFO("model %s: %s, %d layers, n_embd %d, vocab %d; ctx %d, %d slots, %d threads",
                   o.model.c_str(), cfg.arch.c_str(), cfg.n_layer, cfg.n_embd, cfg.n_vocab, n_ctx, n_slots, pool.size());
  const int32_t ubatch = std::min(o.ubatch, n_ctx);
  compute::TransformerStage stage(cfg, std::move(shard), n_slots, n_ctx, ubatch, pool);
  pipeline::LocalRing ring(stage);
  pipeline::SchedulerOptions sopt;
  sopt.n_slots = n_slots;
  sopt.n_ctx = n_ctx;
  sopt.ubatch = ubatch;
  sopt.max_in_flight = 2 * ring.n_stages();
  sopt.decode_groups = ring.n_stages();

  if (o.mode == "perplexity") {
    const std::vector<int32_t> tokens = tok->encode(read_file(o.prompts), true, false);
    PerplexityPlan plan = plan_perplexity(o.prompts, tokens, o.ctx, tok->bos());
    std::vector<std::vector<float>> logprobs(static_cast<size_t>(plan.n_chunk));
    std::string error;
    pipeline::Scheduler sched(sopt, ring, nullptr, [&](pipeline::SequenceOutcome&& out) {
      if (out.finish == pipeline::FinishReason::Error) error = out.error;
      logprobs[static_cast<size_t>(out.seq)] = std::move(out.target_logprobs);
    });
    for (auto& r : plan.chunks) sched.add(std::move(r));
    sched.run();
    if (!error.empty()) throw InputError(o.prompts + ": perplexity failed: " + error);
    PerplexityResult pr = combine_perplexity(logprobs);
    nlohmann::json j = {{"ppl", pr.ppl}, {"mean_nll", pr.mean_nll}, {"n_chunk", plan.n_chunk}, {"n_ctx", plan.n_ctx},
                        {"n_tokens_text", plan.n_tokens_text}, {"n_scored", pr.n_scored}};
    if (!o.jsonl_out.empty()) {
      std::ofstream out(o.jsonl_out);
      out << j.dump() << "\n";
      if (!out) throw InputError(o.jsonl_out + ": write failed");
    }
    std::printf("ppl = %.4f\n", pr.ppl);
    return kExitOk;
  }

  std::vector<io::PromptRecord> records = io::read_prompts(o.prompts);
  io::OrderedLineWriter jsonl(o.jsonl_out.empty() ? "/dev/null" : o.jsonl_out);
  std::vector<PromptPlan> plans(records.size());
  auto emit = [&](const io::ResultRecord& r) { jsonl.put(r.index, io::format_result_line(r)); };
  pipeline::Scheduler sched(
      sopt, ring,
      [&](const pipeline::SequenceOutcome& out) { return ends_generation(*tok, plans[out.seq], out); },
      [&](pipeline::SequenceOutcome&& out) { emit(make_result(*tok, plans[out.seq], out)); });
  for (size_t i = 0; i < records.size(); ++i) {
    const io::PromptRecord& rec = records[i];
    if (!rec.ok) {
      emit(make_error_result(rec, rec.error));
      continue;
    }
    pipeline::SequenceRequest req;
    if (auto err = build_request(rec, o, *tok, static_cast<int32_t>(i), req, plans[i])) {
      emit(make_error_result(rec, o.prompts + ": line " + std::to_string(rec.line) + ": " + *err));
      continue;
    }
    sched.add(std::move(req));
  }
  sched.run();
  jsonl.finish();
  return kExitOk;
}

}  // namespace glacier::app
