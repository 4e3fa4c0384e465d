// The job on every rank. All ranks open the model and agree on any setup error before the ring starts
// (one message, every rank exits non-zero). Rank 0 then drives: prompts in, scheduler over the ring,
// results out in input order; the other ranks run their stage loop until the shutdown message.
#include "app/job.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/memory_fit.h"
#include "app/perplexity.h"
#include "app/progress.h"
#include "app/result_sink.h"
#include "app/sha256.h"
#include "app/signals.h"
#include "app/requests.h"
#include "app/trace_output.h"
#include "compute/transformer_stage.h"
#include "gguf/gguf_file.h"
#include "io/jsonl_writer.h"
#include "io/prompt_reader.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/tokenizer.h"
#include "pipeline/local_ring.h"
#include "pipeline/pipeline_ring.h"
#include "pipeline/partition.h"
#include "pipeline/scheduler.h"
#include "pipeline/stage_loop.h"
#include "pipeline/wire.h"
#include "sys/binding.h"
#include "sys/memory.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

namespace glacier::app {
namespace {

constexpr int32_t kDefaultMaxCtx = 4096;  // a longer context must be asked for with --ctx
constexpr int32_t kDefaultSlots = 32;     // enough sequences in flight for batched decode

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open the text file for reading");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// What every rank sets up before the ring starts.
struct RankSetup {
  std::unique_ptr<gguf::File> file;
  model::ModelConfig cfg;
  model::WeightBytes bytes;
  std::vector<model::LayerRange> split;
  int32_t n_ctx = 0;
  int32_t n_slots = 0;
  int32_t ubatch = 0;
  uint64_t memory_budget = 0;  // bytes this rank may use: its share of the host's (or --max-memory-gib's)
  std::unique_ptr<ThreadPool> pool;
  model::ShardWeights shard;  // moved into the stage once the slot count is agreed
  std::unique_ptr<compute::TransformerStage> stage;
};

// The memory the job may use on this host.
uint64_t host_memory_budget(const JobOptions& o) {
  const uint64_t available = sys::available_memory_bytes();
  if (o.max_memory_gib <= 0) return available;
  return std::min(available, static_cast<uint64_t>(o.max_memory_gib * 1024.0 * 1024.0 * 1024.0));
}

// KV slots when --slots is not given: what half of the rank's memory budget holds, at most kDefaultSlots.
int32_t default_slots(const model::ModelConfig& cfg, model::LayerRange layers, int32_t n_ctx, uint64_t budget) {
  const uint64_t per_slot = compute::KvCache::bytes_needed(std::max(1, layers.size()), 1, n_ctx, cfg.kv_dim());
  const uint64_t fit = budget / 2 / std::max<uint64_t>(per_slot, 1);
  return static_cast<int32_t>(std::clamp<uint64_t>(fit, 1, kDefaultSlots));
}

MemoryShape memory_shape(const JobOptions& o, const RankSetup& s) {
  return {s.cfg, s.bytes, o.slots > 0 ? o.slots : 1, s.n_ctx, s.ubatch};
}

// Reads the model's metadata and plans this rank's part; no weight is read yet.
RankSetup plan_rank(const JobOptions& o, comm::Channel& ch) {
  RankSetup s;
  if (ch.rank() == 0) ResultSink::check_outputs(o);
  s.file = gguf::File::open(o.model);
  s.cfg = model::read_model_config(*s.file);
  s.bytes = model::weight_bytes(*s.file, s.cfg);
  s.split = o.layers.empty() ? pipeline::partition_by_bytes(s.bytes, ch.size())
                             : pipeline::parse_layer_split(o.layers, s.cfg.n_layer, ch.size());
  s.n_ctx = o.ctx > 0 ? o.ctx : std::min(s.cfg.n_ctx_train, kDefaultMaxCtx);
  s.ubatch = std::min(o.ubatch, s.n_ctx);
  return s;
}

// Refuses, on every rank alike, a model whose shards do not fit their hosts' memory (collective).
std::optional<std::string> check_fit(const JobOptions& o, comm::Channel& ch, RankSetup& s) {
  const uint64_t host_budget = host_memory_budget(o);
  const std::vector<std::string> hosts = ch.allgather_strings(ch.host_name());
  const std::vector<int64_t> budgets = ch.allgather(static_cast<int64_t>(host_budget));
  std::map<std::string, uint64_t> smallest;  // a host offers what its most pessimistic rank measured
  for (size_t r = 0; r < hosts.size(); ++r) {
    auto [it, fresh] = smallest.emplace(hosts[r], static_cast<uint64_t>(budgets[r]));
    if (!fresh) it->second = std::min(it->second, static_cast<uint64_t>(budgets[r]));
  }
  std::vector<uint64_t> host_available(hosts.size());
  for (size_t r = 0; r < hosts.size(); ++r) host_available[r] = smallest[hosts[r]];
  s.memory_budget = host_available[static_cast<size_t>(ch.rank())] / static_cast<uint64_t>(std::max(1, ch.local_size()));
  return check_memory_fit(o.model, memory_shape(o, s), s.split, hosts, host_available);
}

// Pins the rank, starts its threads and maps its shard.
void load_rank(const JobOptions& o, comm::Channel& ch, RankSetup& s) {
  const int r = ch.rank(), p = ch.size();
  s.n_slots = o.slots > 0 ? o.slots : default_slots(s.cfg, s.split[r], s.n_ctx, s.memory_budget);
  const sys::BindingPlan plan = sys::plan_binding(o.bind, ch.local_rank(), ch.local_size(), o.threads);
  sys::bind_this_process(plan);
  const int threads = o.threads > 0 ? o.threads : sys::default_threads(plan, ch.local_rank(), ch.local_size());
  s.pool = std::make_unique<ThreadPool>(threads, [plan](int i) { sys::bind_this_thread(plan, i); });
  model::ShardWeights shard = model::load_shard(*s.file, s.cfg, s.split[r], r == 0, r == p - 1);
  GLACIER_LOG_INFO("rank %d of %d on host %s: %s, %d threads; layers %d:%d (%.1f MiB of weights), ctx %d", r, p,
                   ch.host_name().c_str(), plan.description.c_str(), threads, s.split[r].first, s.split[r].last,
                   shard.bytes / 1048576.0, s.n_ctx);
  s.shard = std::move(shard);
}

pipeline::SchedulerOptions scheduler_options(const RankSetup& s, int n_stages) {
  pipeline::SchedulerOptions opt;
  opt.n_slots = s.n_slots;
  opt.n_ctx = s.n_ctx;
  opt.ubatch = s.ubatch;
  opt.max_in_flight = 2 * n_stages;   // the pipeline design's bound: enough to fill and overlap every stage
  opt.decode_groups = n_stages;       // at least one decode group per stage keeps all stages busy
  return opt;
}

// Rank 0's part of a perplexity job.
int drive_perplexity(const JobOptions& o, const model::Tokenizer& tok, pipeline::Ring& ring,
                     const pipeline::SchedulerOptions& sopt) {
  const std::vector<int32_t> tokens = tok.encode(read_file(o.prompts), true, false);
  PerplexityPlan plan = plan_perplexity(o.prompts, tokens, o.ctx, tok.bos());
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

// Rank 0's part of a generate or score job.
int drive_prompts(const JobOptions& o, const model::Tokenizer& tok, const ChatSetup& chat, pipeline::Ring& ring,
                  const pipeline::SchedulerOptions& sopt, const Provenance& provenance) {
  std::vector<io::PromptRecord> records = io::read_prompts(o.prompts);
  ResultSink sink(o, provenance, records);
  const std::vector<bool> finished = o.resume ? sink.resume() : std::vector<bool>(records.size(), false);
  const int64_t already = std::count(finished.begin(), finished.end(), true);
  if (o.resume) GLACIER_LOG_INFO("resuming: %lld of %zu prompts already finished in %s", static_cast<long long>(already),
                                 records.size(), o.h5_out.c_str());
  Progress progress(static_cast<int64_t>(records.size()));
  progress.set_already_done(already);
  std::vector<PromptPlan> plans(records.size());
  int64_t prompt_tokens = 0, generated_tokens = 0, failed = 0;
  auto emit = [&](const io::ResultRecord& r) {
    prompt_tokens += static_cast<int64_t>(r.prompt_tokens.size());
    generated_tokens += r.score ? 0 : static_cast<int64_t>(r.tokens.size());
    failed += r.status == "ok" ? 0 : 1;
    sink.put(r);
  };
  pipeline::Scheduler sched(
      sopt, ring, [&](const pipeline::SequenceOutcome& out) { return ends_generation(tok, plans[out.seq], out); },
      [&](pipeline::SequenceOutcome&& out) {
        io::ResultRecord r = make_result(tok, plans[out.seq], out);
        if (r.status == "error") r.error = o.prompts + ":" + std::to_string(plans[out.seq].record.line) + ": " + r.error;
        emit(r);
      });
  // Polled every scheduling round: keeps the file and the progress line fresh, and drains on SIGTERM.
  sched.set_drain_check([&] {
    sink.tick();
    progress.update(sink.done(), generated_tokens);
    return stop_requested();
  });
  for (size_t i = 0; i < records.size(); ++i) {
    if (finished[i]) continue;
    const io::PromptRecord& rec = records[i];
    if (!rec.ok) {
      emit(make_error_result(rec, rec.error));
      continue;
    }
    pipeline::SequenceRequest req;
    if (auto err = build_request(rec, o, tok, chat, static_cast<int32_t>(i), req, plans[i])) {
      emit(make_error_result(rec, o.prompts + ":" + std::to_string(rec.line) + ": " + *err));
      continue;
    }
    sched.add(std::move(req));
  }
  const double t0 = now_seconds();
  try {
    sched.run();
  } catch (const comm::StallError&) {
    sink.finish();  // a stalled rank ends the job by abort: save every result computed so far first
    throw;
  }
  const double seconds = now_seconds() - t0;
  sink.finish();
  progress.update(sink.done(), generated_tokens);
  progress.finish();
  // The summary line benchmarks read: fixed wording, keep it stable.
  std::printf("done: %zu prompts (%lld failed), %lld prompt tokens, %lld generated tokens in %.3f s: %.1f prompt tok/s, "
              "%.1f generated tok/s, %lld micro-batches\n",
              records.size(), static_cast<long long>(failed), static_cast<long long>(prompt_tokens),
              static_cast<long long>(generated_tokens), seconds, prompt_tokens / seconds, generated_tokens / seconds,
              static_cast<long long>(sched.micro_batches_sent()));
  if (sched.drained_early()) {
    GLACIER_LOG_WARN("stopped by signal %d after %lld of %zu prompts; results are flushed: rerun with --resume to finish",
                     stop_signal(), static_cast<long long>(sink.done()), records.size());
    return kExitInterrupted;
  }
  return kExitOk;
}

Provenance provenance(const JobOptions& o, const RankSetup& s, int ranks, const std::vector<std::string>& hosts);

std::string tensor_type_summary(const gguf::File& f) {
  std::map<std::string, int> counts;
  for (const auto& t : f.tensors()) counts[gguf::type_name(t.type)]++;
  std::string s;
  for (const auto& [name, n] : counts) {
    if (!s.empty()) s += ',';
    s += name;
    s += ':';
    s += std::to_string(n);
  }
  return s;
}

Provenance provenance(const JobOptions& o, const RankSetup& s, int ranks, const std::vector<std::string>& hosts) {
  Provenance prov;
  prov.model_path = o.model;
  prov.model_bytes = s.file->file_size();
  prov.model_sha256 = sha256_file(o.model);
  prov.tensor_types = tensor_type_summary(*s.file);
  prov.layer_split = pipeline::format_layer_split(s.split);
  prov.ranks = ranks;
  for (const std::string& h : hosts) {
    if (!prov.hosts.empty()) prov.hosts += ',';
    prov.hosts += h;
  }
  prov.options = describe_options(o);
  prov.version = kVersion;
  prov.mode = o.mode;
  return prov;
}

}  // namespace

int run_job(const JobOptions& o, comm::Channel& ch) {
  // Every rank takes SIGTERM/SIGUSR1 as a request: rank 0 drains the queue, the others follow its shutdown.
  install_stop_signals();
  pipeline::TraceLog trace;
  RankSetup s;
  std::unique_ptr<model::Tokenizer> tok;
  std::optional<std::string> error;
  try {
    s = plan_rank(o, ch);
  } catch (const InputError& e) {
    error = e.what();
  }
  if (auto agreed = ch.agree_on_error(error)) throw InputError(*agreed);
  if (auto agreed = ch.agree_on_error(check_fit(o, ch, s))) throw InputError(*agreed);
  try {
    load_rank(o, ch, s);
    if (ch.rank() == 0) tok = model::Tokenizer::from_gguf(*s.file);
  } catch (const InputError& e) {
    error = e.what();
  }
  if (auto agreed = ch.agree_on_error(error)) throw InputError(*agreed);
  ch.configure_faults({o.stall_timeout, o.inject_latency_ms / 1000.0});
  // Every stage must hold the same slots: the smallest any rank's memory allows.
  const std::vector<int64_t> slots = ch.allgather(s.n_slots);
  s.n_slots = static_cast<int32_t>(*std::min_element(slots.begin(), slots.end()));
  if (ch.rank() == 0) GLACIER_LOG_INFO("%d KV slots of %d positions, micro-batches of up to %d tokens", s.n_slots, s.n_ctx, s.ubatch);
  s.stage = std::make_unique<compute::TransformerStage>(s.cfg, std::move(s.shard), s.n_slots, s.n_ctx, s.ubatch, *s.pool);

  const std::vector<std::string> hosts = ch.allgather_strings(ch.host_name());
  const pipeline::WireCodec codec = pipeline::parse_codec(o.wire);
  const pipeline::SchedulerOptions sopt = scheduler_options(s, ch.size());
  int code = kExitOk;
  std::optional<std::string> driver_error;
  if (ch.rank() == 0) {
    std::unique_ptr<pipeline::Ring> ring;
    pipeline::PipelineRing* pipeline_ring = nullptr;
    if (ch.size() == 1) {
      ring = std::make_unique<pipeline::LocalRing>(*s.stage, sopt.max_in_flight);
    } else {
      auto r = std::make_unique<pipeline::PipelineRing>(ch, *s.stage, ch.size(), sopt.max_in_flight, codec, trace);
      pipeline_ring = r.get();
      ring = std::move(r);
    }
    // A failure while driving (a refused --resume, an unreadable prompt file, a full disk) must still
    // end the ring cleanly, or the other ranks would wait forever for the shutdown message.
    try {
      if (o.mode == "perplexity") {
        code = drive_perplexity(o, *tok, *ring, sopt);
      } else {
        const ChatSetup chat = choose_chat_template(o, s.file->find_string("tokenizer.chat_template"));
        code = drive_prompts(o, *tok, chat, *ring, sopt, provenance(o, s, ch.size(), hosts));
      }
    } catch (const comm::StallError&) {
      throw;  // the ring cannot be shut down through a stalled rank: main aborts the job
    } catch (const InputError& e) {
      driver_error = e.what();
      code = kExitInputError;
    } catch (const std::exception& e) {
      driver_error = e.what();
      code = kExitFailure;
    }
    if (pipeline_ring) pipeline_ring->shutdown();
  } else {
    pipeline::run_stage_loop(ch, *s.stage, ch.rank(), ch.size(), codec, trace);
  }
  GLACIER_LOG_INFO("peak RSS %.1f MiB", sys::peak_rss_bytes() / 1048576.0);
  // Every rank learns whether the driver failed; then nobody touches the output file again.
  const std::vector<int64_t> codes = ch.allgather(code);
  if (auto failed = ch.agree_on_error(driver_error)) throw JobFailed(*failed, static_cast<int>(codes[0]));
  ch.barrier();
  if (!o.h5_out.empty()) write_trace(o.h5_out, ch, trace);
  return code;
}

}  // namespace glacier::app
