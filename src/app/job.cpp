// The job on every rank. All ranks open the model and agree on any setup error before the ring starts
// (one message, every rank exits non-zero). Rank 0 then drives: prompts in, scheduler over the ring,
// results out in input order; the other ranks run their stage loop until the shutdown message.
#include "app/job.h"

#include <algorithm>
#include <deque>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "app/decode_group_tuning.h"
#include "app/draft_model.h"
#include "app/input_checks.h"
#include "app/measured_split.h"
#include "app/perplexity.h"
#include "app/progress.h"
#include "app/prompt_sampling.h"
#include "app/result_sink.h"
#include "app/output_guard.h"
#include "app/provenance.h"
#include "app/signals.h"
#include "app/requests.h"
#include "app/trace_output.h"
#include "app/work_queue.h"
#include "comm/startup_watchdog.h"
#include "compute/transformer_stage.h"
#include "gguf/gguf_file.h"
#include "io/hdf5_perplexity.h"
#include "io/jsonl_writer.h"
#include "io/prompt_reader.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/shard_set.h"
#include "model/tokenizer.h"
#include "pipeline/expert_group_channel.h"
#include "pipeline/local_ring.h"
#include "pipeline/pipeline_ring.h"
#include "pipeline/partition.h"
#include "pipeline/scheduler.h"
#include "pipeline/stage_loop.h"
#include "pipeline/wire.h"
#include "planning/layout.h"
#include "planning/memory_fit.h"
#include "sys/binding.h"
#include "sys/memory.h"
#include "util/backoff.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/stop_request.h"

namespace glacier::app {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open the text file for reading");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// What every rank sets up before the ring starts.
struct RankSetup {
  std::optional<model::ShardSet> shards;  // --model DIR: one file a stage (glacier_shard); the split is the set's
  std::unique_ptr<gguf::File> file;       // the whole model, or this rank's stage of the shard set
  model::ModelConfig cfg;
  model::WeightBytes bytes;
  int replicas = 1;
  int n_stages = 1;  // ranks per pipeline replica
  int replica = 0;   // this rank's replica and its stage in it
  int stage_index = 0;
  // --expert-parallel: each ring rank (world ranks [0, ring_ranks), laid out as without it) leads a group of
  // expert_parallel ranks; member j > 0 of ring rank r is world rank j * ring_ranks + r.
  int expert_parallel = 1;
  int ring_ranks = 1;
  int expert_index = 0;  // this rank's index in its group (0: the leader, on the ring)
  std::vector<model::LayerRange> split;  // one range per stage
  int32_t n_ctx = 0;
  int32_t n_slots = 0;
  int32_t ubatch = 0;
  int32_t decode_groups = 0;  // --decode-groups, then the count plan_decode_groups chose (auto)
  uint64_t memory_budget = 0;  // bytes this rank may use: its share of the host's (or --max-memory-gib's)
  planning::HostMemory memory;
  pipeline::ComputeThrottle throttle;  // --slow-rank
  std::string binding;  // how the rank and its threads are pinned (for the log)
  std::unique_ptr<ThreadPool> pool;
  model::ShardWeights shard;  // moved into the stage once the slot count is agreed
  std::unique_ptr<compute::TransformerStage> stage;
  std::unique_ptr<comm::Channel> group_channel;           // --expert-parallel > 1: this rank's expert group
  std::unique_ptr<pipeline::ChannelExpertGroup> group;
  std::unique_ptr<DraftModel> draft;  // --speculate draft:PATH, on each pipeline's driver
  std::vector<std::unique_ptr<OutputLock>> output_locks;  // rank 0: one writer per output file
};

// The memory the job may use on this host.
uint64_t host_memory_budget(const JobOptions& o) {
  const uint64_t available = sys::available_memory_bytes();
  if (o.max_memory_gib <= 0) return available;
  return std::min(available, static_cast<uint64_t>(o.max_memory_gib * 1024.0 * 1024.0 * 1024.0));
}

planning::MemoryShape memory_shape(const JobOptions& o, const RankSetup& s) {
  return planning::memory_shape(s.cfg, s.bytes, s.n_ctx, s.ubatch, o.slots, o.decode_groups);
}

planning::SplitRequest split_request(const JobOptions& o) { return {o.layers, o.partition, o.replicas}; }

// --expert-parallel against the rank count (before the layout, which counts ring ranks).
void check_expert_ranks(const JobOptions& o, comm::Channel& ch, RankSetup& s) {
  s.expert_parallel = o.expert_parallel;
  if (ch.size() % o.expert_parallel != 0)
    throw InputError("option --expert-parallel: expected a divisor of the job's " + std::to_string(ch.size()) +
                     " ranks (ranks = stages x expert-parallel x replicas), found " + std::to_string(o.expert_parallel));
  s.ring_ranks = ch.size() / o.expert_parallel;
  s.expert_index = ch.rank() / s.ring_ranks;
}

// --expert-parallel against the model: there must be experts to split, evenly.
void check_expert_model(const JobOptions& o, const RankSetup& s) {
  if (o.expert_parallel == 1) return;
  if (!s.cfg.is_moe() || s.cfg.n_layer_dense_lead >= s.cfg.n_layer)
    throw InputError("option --expert-parallel: expected 1 for " + o.model +
                     ", which has no mixture-of-experts layers to split, found " + std::to_string(o.expert_parallel));
  if (s.cfg.n_expert % o.expert_parallel != 0)
    throw InputError("option --expert-parallel: expected a divisor of the model's " + std::to_string(s.cfg.n_expert) +
                     " experts (" + o.model + "), found " + std::to_string(o.expert_parallel));
}

// Opens the rank's model file: the whole file, or its stage's file of a shard set.
void open_model(const JobOptions& o, comm::Channel& ch, RankSetup& s) {
  if (model::is_shard_set_path(o.model)) {
    s.shards = model::read_shard_set(o.model);
    // Stages repeat every n_stages ring ranks, and ring_ranks is a multiple of n_stages, so a group member
    // (world rank j * ring_ranks + r) opens its leader's stage.
    planning::check_fixed_split_options(split_request(o), o.partition_from, o.model, s.shards->n_stages(), s.ring_ranks);
    s.file = model::open_shard(*s.shards, ch.rank() % s.shards->n_stages());
    return;
  }
  s.file = gguf::File::open(o.model);
  if (const std::string key = model::shard_key_of(*s.file); !key.empty())
    throw InputError(o.model + ": key '" + key + "': expected a whole model file, found one stage of a shard set "
                     "(glacier_shard): pass the set's directory to --model");
}

// Reads the model's metadata; no weight is read yet.
RankSetup read_model(const JobOptions& o, comm::Channel& ch) {
  RankSetup s;
  if (ch.rank() == 0) ResultSink::check_outputs(o);
  check_threads(o, sys::host_hardware_thread_count(), ch.host_name());
  const PromptFileFacts prompts = ch.rank() == 0 ? check_prompt_file(o) : PromptFileFacts{};
  if (ch.rank() == 0) s.output_locks = lock_outputs(o);  // before anything is written; held until the trace is in
  check_expert_ranks(o, ch, s);
  open_model(o, ch, s);
  if (ch.rank() == 0) check_chat_template(o, prompts, s.file->find_string("tokenizer.chat_template"));
  s.cfg = model::read_model_config(*s.file);
  check_expert_model(o, s);
  if (s.shards && s.shards->n_layer != s.cfg.n_layer)
    throw InputError(s.shards->manifest_path + ": field \"n_layer\": expected the block_count of its files (" +
                     std::to_string(s.cfg.n_layer) + "), found " + std::to_string(s.shards->n_layer));
  s.bytes = s.shards ? s.shards->bytes : model::weight_bytes(*s.file, s.cfg);
  s.n_ctx = o.ctx > 0 ? o.ctx : std::min(s.cfg.n_ctx_train, planning::kDefaultMaxCtx);
  s.ubatch = std::min(o.ubatch, s.n_ctx);
  s.decode_groups = o.decode_groups;
  return s;
}

// Each host's memory as its most pessimistic rank measured it, by world rank (collective).
planning::HostMemory gather_host_memory(const JobOptions& o, comm::Channel& ch) {
  const std::vector<std::string> hosts = ch.allgather_strings(ch.host_name());
  std::vector<uint64_t> budgets;
  for (int64_t b : ch.allgather(static_cast<int64_t>(host_memory_budget(o)))) budgets.push_back(static_cast<uint64_t>(b));
  return planning::host_memory(hosts, budgets);
}

// Rank 0's line about a split that needed no measurement.
void log_split(const JobOptions& o, const RankSetup& s) {
  const std::string split = pipeline::format_layer_split(s.split);
  if (s.shards) {
    GLACIER_LOG_INFO("layer split %s (the shard set %s, cut from %s)", split.c_str(), s.shards->manifest_path.c_str(),
                     s.shards->source_name.c_str());
    return;
  }
  if (!o.layers.empty()) {
    GLACIER_LOG_INFO("layer split %s (by hand, --layers)", split.c_str());
    return;
  }
  if (o.partition == "bytes") {
    GLACIER_LOG_INFO("layer split %s (--partition bytes: balanced by weight bytes)", split.c_str());
    return;
  }
  const planning::StageFill f = planning::stage_fill(memory_shape(o, s), s.split, s.memory);
  std::string fill;
  for (double percent : f.percent) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.1f%%", fill.empty() ? "" : ", ", percent);
    fill += buf;
  }
  GLACIER_LOG_INFO("layer split %s (--partition %s%s): memory need / available by stage %s", split.c_str(),
                   o.partition.c_str(),
                   f.within ? "" : "; no split keeps every rank within its share of its host: balanced by weight bytes",
                   fill.c_str());
}

// Chooses replicas and the layer split, and refuses a model whose shards do not fit their hosts'
// memory, on every rank alike (collective; throws InputError).
void plan_layout(const JobOptions& o, comm::Channel& ch, RankSetup& s) {
  if (o.slow_rank >= ch.size())
    throw InputError("option --slow-rank: expected a rank below the job's " + std::to_string(ch.size()) + ", found " +
                     std::to_string(o.slow_rank));
  s.memory = gather_host_memory(o, ch);
  s.memory_budget =
      s.memory.available[static_cast<size_t>(ch.rank())] / static_cast<uint64_t>(std::max(1, ch.local_size()));
  // The ring ranks are laid out as a job without expert groups; each group member takes its leader's place.
  planning::Layout layout;
  try {
    layout = planning::plan_layout(split_request(o), o.model, memory_shape(o, s), s.memory, s.ring_ranks,
                                   s.shards ? s.shards->split : std::vector<model::LayerRange>{});
  } catch (const InputError& e) {
    if (s.expert_parallel == 1) throw;
    // The layout's rank counts are ring ranks: say so, or its "-np" advice would be off by the factor.
    throw InputError(std::string(e.what()) + " (with --expert-parallel " + std::to_string(s.expert_parallel) +
                     " the ranks above are the job's " + std::to_string(ch.size()) + " divided by " +
                     std::to_string(s.expert_parallel) + ")");
  }
  s.replicas = layout.replicas;
  s.n_stages = layout.n_stages;
  s.replica = layout.replica_of(ch.rank() % s.ring_ranks);
  s.stage_index = layout.stage_of(ch.rank() % s.ring_ranks);
  s.split = layout.split;
  if (ch.rank() == 0 && o.partition != "measured") log_split(o, s);
}

// Pins the rank and starts its threads (before a calibration, which times them).
void start_threads(const JobOptions& o, comm::Channel& ch, RankSetup& s) {
  const sys::BindingPlan plan = sys::plan_binding(o.bind, ch.local_rank(), ch.local_size(), o.threads);
  sys::bind_this_process(plan);
  const int threads = o.threads > 0 ? o.threads : sys::default_threads(plan, ch.local_rank(), ch.local_size());
  s.pool = std::make_unique<ThreadPool>(threads, [plan](int t) { sys::bind_this_thread(plan, t); });
  s.binding = plan.description;
  if (ch.rank() == o.slow_rank) {
    s.throttle = pipeline::ComputeThrottle(o.slow_factor);
    GLACIER_LOG_WARN("rank %d computes %.3g times slower on purpose (--slow-rank, a testing aid)", ch.rank(), o.slow_factor);
  }
}

// Maps the rank's shard.
void load_rank(const JobOptions& o, comm::Channel& ch, RankSetup& s) {
  const int i = s.stage_index, p = s.n_stages;
  s.n_slots = o.slots > 0 ? o.slots
                          : std::max(planning::default_slots(s.cfg, s.split[i], s.n_ctx, s.memory_budget), o.decode_groups);
  const int threads = s.pool->size();
  // Each tensor checked and each matrix packed tells the start-up watchdog this rank is alive. A
  // --slow-rank loads slower too, by the same factor (a slow file system to test the watchdog with).
  double step_started = now_seconds();
  const auto report = [&](uint64_t done, uint64_t total, const char* pass) {
    s.throttle.after_compute(now_seconds() - step_started, [] { comm::startup::tick(); });
    step_started = now_seconds();
    char detail[96];
    std::snprintf(detail, sizeof detail, "%.1f of %.1f MiB %s", done / 1048576.0, total / 1048576.0, pass);
    comm::startup::progress(detail);
  };
  // Only a group's leader embeds and evaluates the head: the other members run the layers alone.
  const bool leader = s.expert_index == 0;
  const model::ExpertShare experts{s.expert_index, s.expert_parallel};
  model::ShardWeights shard =
      model::load_shard(*s.file, s.cfg, s.split[i], i == 0 && leader, i == p - 1 && leader, s.pool.get(), report, experts);
  std::string replica;
  if (s.replicas > 1) replica = ", replica " + std::to_string(s.replica) + " stage " + std::to_string(i);
  if (s.expert_parallel > 1) replica += ", expert group member " + std::to_string(s.expert_index);
  GLACIER_LOG_INFO("rank %d of %d%s on host %s: %s, %d threads; layers %d:%d (%.1f MiB of weights), ctx %d",
                   ch.rank(), ch.size(), replica.c_str(), ch.host_name().c_str(), s.binding.c_str(), threads,
                   s.split[i].first, s.split[i].last, shard.bytes / 1048576.0, s.n_ctx);
  if (shard.all_expert_bytes > 0)
    GLACIER_LOG_INFO("rank %d holds %.1f of its layers' %.1f MiB of expert weights (experts e with e %% %d == %d)",
                     ch.rank(), shard.expert_bytes / 1048576.0, shard.all_expert_bytes / 1048576.0, s.expert_parallel,
                     s.expert_index);
  s.shard = std::move(shard);
}

pipeline::SchedulerOptions scheduler_options(const JobOptions& o, const RankSetup& s, int n_stages) {
  pipeline::SchedulerOptions opt;
  opt.n_slots = s.n_slots;
  opt.n_ctx = s.n_ctx;
  opt.ubatch = s.ubatch;
  opt.share_prompt = o.n_prefill == "once";
  opt.prefix_sharing = o.prefix_sharing == "on" && o.mode != "perplexity";  // a perplexity's chunks share nothing
  opt.draft_max = o.speculate != "off" ? o.draft_max : 0;
  opt.drafts = s.draft ? &s.draft->drafter() : nullptr;
  // The pipeline design's bound: enough to fill and overlap every stage. One stage computes each
  // micro-batch as it is submitted, so a second in flight overlaps nothing; it would only split the
  // decode steps into two cohorts (each reading every weight) where one micro-batch can hold them all.
  // At least one decode group per stage keeps all stages busy; more (--decode-groups) keep a stage busy
  // while other groups cross slow links: a group's round trip is its compute plus a hop per stage.
  opt.decode_groups = s.decode_groups > 0 ? s.decode_groups : n_stages;
  opt.max_in_flight = planning::micro_batches_in_flight(s.decode_groups, n_stages);  // as the memory check counts them
  return opt;
}

// This replica's counts for /trace (summed over the replicas there).
io::TraceCounters job_counters(const pipeline::Scheduler& sched) {
  const pipeline::SpeculationCounts& sp = sched.speculation();
  return {sched.prompt_tokens_computed(), sched.prompt_tokens_reused(), sp.verifications, sp.drafted, sp.accepted,
          sp.emitted, sp.skipped_ring_full, sp.skipped_low_acceptance};
}

// --speculate's summary (this replica's share): how much drafting paid.
void print_speculation(const pipeline::SpeculationCounts& sp) {
  const double per_step = sp.verifications > 0 ? static_cast<double>(sp.emitted) / static_cast<double>(sp.verifications) : 0.0;
  const double rate = sp.drafted > 0 ? static_cast<double>(sp.accepted) / static_cast<double>(sp.drafted) : 0.0;
  std::printf("speculation: %lld verify steps, %lld tokens drafted, %lld accepted (%.1f%%), %.2f tokens per "
              "verification, %lld sequences decoded without (penalized), %lld steps without drafts as the "
              "decode groups were full, %lld for low acceptance\n",
              static_cast<long long>(sp.verifications), static_cast<long long>(sp.drafted),
              static_cast<long long>(sp.accepted), 100.0 * rate, per_step, static_cast<long long>(sp.plain_sequences),
              static_cast<long long>(sp.skipped_ring_full), static_cast<long long>(sp.skipped_low_acceptance));
  if (sp.plain_sequences > 0)
    GLACIER_LOG_WARN("--speculate: %lld sequences with repetition, frequency or presence penalties decoded "
                     "without drafts (a verify step would count drafts it then rejects in their penalties)",
                     static_cast<long long>(sp.plain_sequences));
}

// Rank 0's part of a perplexity job.
int drive_perplexity(const JobOptions& o, const model::Tokenizer& tok, pipeline::Ring& ring,
                     const pipeline::SchedulerOptions& sopt, const Provenance& provenance) {
  // --out gets a new file (never an earlier run's, which would then hold this run's trace beside its
  // own results) with the provenance now and the figures at the end; the JSONL is written below.
  JobOptions h5_only = o;
  h5_only.jsonl_out.clear();
  const std::vector<io::PromptRecord> no_prompts;
  std::optional<ResultSink> sink;
  if (!o.h5_out.empty()) sink.emplace(h5_only, provenance, no_prompts);
  const std::vector<int32_t> tokens = tok.encode(read_file(o.prompts), true, false);
  PerplexityPlan plan = plan_perplexity(o.prompts, tokens, o.ctx, tok.bos());
  std::vector<std::vector<float>> logprobs(static_cast<size_t>(plan.n_chunk));
  std::vector<bool> finished(static_cast<size_t>(plan.n_chunk), false);
  std::string error;
  // Chunks finish in any order; the running values are printed, as llama-perplexity prints them, for
  // the longest run of finished chunks from the first, so each covers exactly the chunks before it.
  PerplexityAccumulator acc;
  size_t next_to_fold = 0;
  pipeline::Scheduler sched(sopt, ring, nullptr, [&](pipeline::SequenceOutcome&& out) {
    if (out.finish == pipeline::FinishReason::Error) error = out.error;
    const auto c = static_cast<size_t>(out.seq);
    logprobs[c] = std::move(out.target_logprobs);
    finished[c] = true;
    for (; next_to_fold < finished.size() && finished[next_to_fold] && error.empty(); ++next_to_fold) {
      const PerplexityChunk& chunk = acc.add_chunk(logprobs[next_to_fold]);
      std::fputs(format_running_ppl(static_cast<int32_t>(next_to_fold) + 1, chunk.running_ppl).c_str(), stdout);
      std::fflush(stdout);
    }
  });
  for (auto& r : plan.chunks) sched.add(std::move(r));
  sched.run();
  std::fputs("\n", stdout);
  if (!error.empty()) throw InputError(o.prompts + ": perplexity failed: " + error);
  GLACIER_ASSERT(next_to_fold == finished.size(), "perplexity: a chunk never finished");
  const PerplexityResult pr = acc.result();
  const nlohmann::json j = perplexity_json(plan, pr);
  if (!o.jsonl_out.empty()) {
    std::ofstream out(o.jsonl_out);
    out << j.dump() << "\n";
    if (!out) throw InputError(o.jsonl_out + ": write failed");
  }
  if (sink) {
    sink->record_attribute("perplexity", j.dump());
    sink->finish();
    io::write_perplexity(o.h5_out, perplexity_table(plan, pr, logprobs));
  }
  std::fputs(format_chunk_table(pr).c_str(), stdout);
  std::printf("%s\n", format_final_estimate(pr).c_str());
  return kExitOk;
}

// A replica driver's view of the prompt file: turns prompt indices into scheduler requests and finished
// sequences into result records. Every driver reads the file itself, so only indices travel.
class PromptBook {
 public:
  PromptBook(const JobOptions& o, const model::Tokenizer& tok, const ChatSetup& chat)
      : o_(o), tok_(tok), chat_(chat), records_(io::read_prompts(o.prompts)), plans_(records_.size()) {}
  const std::vector<io::PromptRecord>& records() const { return records_; }

  // Queues prompt i, or returns its error rows (one a sample) when it cannot run.
  std::vector<io::ResultRecord> add(int32_t i, pipeline::Scheduler& sched) {
    const io::PromptRecord& rec = records_[static_cast<size_t>(i)];
    if (!rec.ok) return {make_error_result(rec, rec.error)};
    if (rec.continuations) return add_continuations(i, sched);
    if (rec.prompt_elements() > 1) return add_prompt_list(i, sched);
    pipeline::SequenceRequest req;
    PromptPlan& plan = plans_[static_cast<size_t>(i)];
    if (auto err = build_request(rec, o_, tok_, chat_, i, req, plan)) {
      std::vector<io::ResultRecord> rows;
      for (int32_t j = 0; j < plan.n_samples; ++j) {
        rows.push_back(make_error_result(rec, where(rec) + *err));
        rows.back().sample = j;
      }
      return rows;
    }
    sched.add(std::move(req));
    return {};
  }
  bool ends(const pipeline::SequenceOutcome& out) const {
    return ends_generation(tok_, plans_[static_cast<size_t>(out.seq)], out);
  }
  // A finished sample's row; once every sample of its prompt has finished, the prompt's rows in sample
  // order (empty until then).
  std::vector<io::ResultRecord> result(const pipeline::SequenceOutcome& out) {
    const PromptPlan& plan = plans_[static_cast<size_t>(out.seq)];
    const auto choices = choice_plans_.find(out.seq);
    io::ResultRecord r = make_result(
        tok_, choices == choice_plans_.end() ? plan : choices->second.at(static_cast<size_t>(out.sample)), out);
    if (r.status == "error") r.error = where(plan.record) + r.error;
    if (plan.n_samples == 1) return {std::move(r)};
    std::vector<io::ResultRecord>& rows = unfinished_[out.seq];
    rows.push_back(std::move(r));
    if (rows.size() < static_cast<size_t>(plan.n_samples)) return {};
    std::vector<io::ResultRecord> done = std::move(rows);
    unfinished_.erase(out.seq);
    choice_plans_.erase(out.seq);
    std::sort(done.begin(), done.end(), [](const io::ResultRecord& a, const io::ResultRecord& b) { return a.sample < b.sample; });
    return done;
  }

 private:
  std::string where(const io::PromptRecord& rec) const { return o_.prompts + ":" + std::to_string(rec.line) + ": "; }

  const JobOptions& o_;
  const model::Tokenizer& tok_;
  const ChatSetup& chat_;
  std::vector<io::PromptRecord> records_;
  // A `continuations` line: each continuation is a score sequence of its own (row k of the line, its
  // `sample`), planned as the line with that one continuation; they share the context's KV rows through
  // the scheduler's prefix sharing. All k run, or the line fails as a whole.
  std::vector<io::ResultRecord> add_continuations(int32_t i, pipeline::Scheduler& sched) {
    const io::PromptRecord& rec = records_[static_cast<size_t>(i)];
    const size_t n = rec.continuations->size();
    std::vector<PromptPlan> plans(n);
    std::vector<pipeline::SequenceRequest> reqs(n);
    const auto fail_all = [&](const std::string& message) {
      std::vector<io::ResultRecord> rows;
      for (size_t j = 0; j < n; ++j) {
        rows.push_back(make_error_result(rec, where(rec) + message));
        rows.back().sample = static_cast<int64_t>(j);
      }
      return rows;
    };
    // One row a continuation: samples would multiply them.
    if (const int32_t samples = sampling_for(rec, o_).n; samples != 1)
      return fail_all("n of " + std::to_string(samples) + ": expected 1 for a \"continuations\" line (a score has one answer)");
    for (size_t k = 0; k < n; ++k) {
      io::PromptRecord one = rec;
      one.continuations.reset();
      one.continuation = (*rec.continuations)[k];
      if (auto err = build_request(one, o_, tok_, chat_, i, reqs[k], plans[k])) {
        // Built with += (GCC 12 warns falsely on long operator+ chains of std::string).
        std::string message = "\"continuations[";
        message += std::to_string(k);
        message += "]\": ";
        message += *err;
        return fail_all(message);
      }
      reqs[k].row = static_cast<int32_t>(k);
    }
    PromptPlan& plan = plans_[static_cast<size_t>(i)];
    plan = plans[0];
    plan.record = rec;
    plan.n_samples = static_cast<int32_t>(n);
    choice_plans_[i] = std::move(plans);
    for (pipeline::SequenceRequest& req : reqs) sched.add(std::move(req));
    return {};
  }

  // An OpenAI completions request with a prompt array: element p is a prompt of its own (the line with
  // that one prompt) whose n samples are rows p*n .. p*n+n-1. All elements run, or the line fails whole.
  std::vector<io::ResultRecord> add_prompt_list(int32_t i, pipeline::Scheduler& sched) {
    const io::PromptRecord& rec = records_[static_cast<size_t>(i)];
    const size_t m = rec.prompt_elements();
    const int32_t n = sampling_for(rec, o_).n;
    const int32_t rows = result_rows(rec, o_);
    const auto fail_all = [&](const std::string& message) {
      std::vector<io::ResultRecord> out;
      for (int32_t j = 0; j < rows; ++j) {
        out.push_back(make_error_result(rec, where(rec) + message));
        out.back().sample = j;
      }
      return out;
    };
    if (static_cast<int64_t>(m) * n != rows)
      return fail_all("n of " + std::to_string(n) + " (from --n): expected at most " +
                      std::to_string(io::kMaxSamplesPerPrompt / static_cast<int32_t>(m)) + " with a prompt array of " +
                      std::to_string(m) + " prompts (at most " + std::to_string(io::kMaxSamplesPerPrompt) +
                      " choices in one request)");
    std::vector<PromptPlan> plans(static_cast<size_t>(rows));
    std::vector<pipeline::SequenceRequest> reqs(m);
    for (size_t p = 0; p < m; ++p) {
      io::PromptRecord one = rec;
      one.prompt_list.reset();
      one.prompt_token_ids_list.reset();
      if (rec.prompt_list) one.prompt = (*rec.prompt_list)[p];
      else one.prompt_token_ids = (*rec.prompt_token_ids_list)[p];
      PromptPlan plan;
      if (auto err = build_request(one, o_, tok_, chat_, i, reqs[p], plan)) {
        std::string message = "\"body.prompt[";
        message += std::to_string(p);
        message += "]\": ";
        message += *err;
        return fail_all(message);
      }
      reqs[p].row = static_cast<int32_t>(p) * n;
      for (int32_t j = 0; j < n; ++j) plans[p * static_cast<size_t>(n) + static_cast<size_t>(j)] = plan;
    }
    PromptPlan& plan = plans_[static_cast<size_t>(i)];
    plan = plans[0];
    plan.record = rec;
    plan.n_samples = rows;
    choice_plans_[i] = std::move(plans);
    for (pipeline::SequenceRequest& req : reqs) sched.add(std::move(req));
    return {};
  }

  std::vector<PromptPlan> plans_;
  // Per `continuations` line or prompt-array request, one plan per row (continuation, or element's sample).
  std::map<int32_t, std::vector<PromptPlan>> choice_plans_;
  std::map<int32_t, std::vector<io::ResultRecord>> unfinished_;  // prompts with some samples finished
};

// How many prompts a driver keeps queued beyond its busy slots: one per slot, so every slot that frees
// finds a prompt at once, while the rest of the file stays in the shared queue for the other replicas.
int32_t queue_room(const pipeline::SchedulerOptions& sopt, const pipeline::Scheduler& sched) {
  return sopt.n_slots - static_cast<int32_t>(sched.queued());
}

void idle_pause() { Backoff(backoff::kIdleDriver).pause(); }

// World rank 0's part of a generate or score job: the driver of replica 0, the one queue of prompts for
// every replica (`clients`: the other replicas' drivers) and the writer of the results.
int drive_prompts(const JobOptions& o, const model::Tokenizer& tok, const ChatSetup& chat, pipeline::Ring& ring,
                  const pipeline::SchedulerOptions& sopt, const Provenance& provenance, comm::Channel& world,
                  const std::vector<int>& clients, io::TraceCounters& counters, const planning::DecodeGroupPlan& groups) {
  PromptBook book(o, tok, chat);
  const std::vector<io::PromptRecord>& records = book.records();
  ResultSink sink(o, provenance, records);
  sink.set_token_text([&tok](int32_t id) { return tok.token_to_piece(id, true); });
  const std::vector<bool> finished = o.resume ? sink.resume() : std::vector<bool>(records.size(), false);
  const int64_t already = std::count(finished.begin(), finished.end(), true);
  Progress progress(static_cast<int64_t>(records.size()));
  progress.set_already_done(already);
  int64_t prompt_tokens = 0, generated_tokens = 0, finished_ok = 0, failed = 0;
  // One prompt's rows (one a sample). A prompt counts as failed when any of its samples failed; its
  // prompt tokens count once (its samples share one prefill).
  auto emit = [&](const std::vector<io::ResultRecord>& rows) {
    bool ok = true;
    for (const io::ResultRecord& r : rows) {
      if (r.status == "ok") {  // a failed row's tokens were never processed: they count in no rate
        if (r.sample == 0) prompt_tokens += static_cast<int64_t>(r.prompt_tokens.size());
        generated_tokens += r.score ? 0 : static_cast<int64_t>(r.tokens.size());
      } else {
        ok = false;
      }
      sink.put(r);
    }
    ++(ok ? finished_ok : failed);
  };
  std::deque<int32_t> queue;
  for (size_t i = 0; i < records.size(); ++i) {
    if (finished[i]) continue;
    if (!records[i].ok) {
      emit({make_error_result(records[i], records[i].error)});
    } else {
      queue.push_back(static_cast<int32_t>(i));
    }
  }
  WorkCoordinator coord(world, clients, std::move(queue));
  pipeline::Scheduler sched(
      sopt, ring, [&](const pipeline::SequenceOutcome& out) { return book.ends(out); },
      [&](pipeline::SequenceOutcome&& out) {
        std::vector<io::ResultRecord> rows = book.result(out);
        if (rows.empty()) return;  // more samples of the prompt to come
        coord.own_result();
        emit(rows);
      });
  std::optional<pipeline::DecodeGroupRetuner> retuner = planning::make_retuner(groups);
  if (retuner) retune_between_waves(sched, *retuner);
  // Another replica's prompt: its rows arrive together, one at a time here.
  std::map<int64_t, std::vector<io::ResultRecord>> remote_rows;
  auto remote = [&](io::ResultRecord&& r) {
    const int64_t index = r.index;
    std::vector<io::ResultRecord>& rows = remote_rows[index];
    rows.push_back(std::move(r));
    if (rows.size() < sink.rows_of(index)) return;
    emit(rows);
    remote_rows.erase(index);
  };
  auto refill = [&] {
    for (int32_t i : coord.take(queue_room(sopt, sched))) {
      std::vector<io::ResultRecord> err = book.add(i, sched);
      if (!err.empty()) {
        coord.own_result();
        emit(err);
      }
    }
  };
  bool stopping = false;
  // Between scheduling rounds: keeps the file and the progress line fresh, serves the other replicas,
  // and drains on SIGTERM.
  auto tend = [&] {
    sink.tick();
    progress.update(sink.done(), generated_tokens);
    coord.serve(remote);
    if (!stopping && stop_requested()) {
      stopping = true;
      GLACIER_LOG_WARN("%s: draining the job (finishing the prompts in flight, starting no new one)",
                       describe_stop().c_str());
      coord.stop_handing_out();
    }
    return stopping;
  };
  sched.set_drain_check([&] {
    if (tend()) return true;
    refill();
    return false;
  });
  const double t0 = now_seconds();
  try {
    while (!stopping) {
      refill();
      if (sched.queued() == 0 && coord.queue_empty()) break;
      if (sched.queued() > 0) {
        sched.run();
      } else if (tend()) {  // nothing of ours to run (our share is taken): serve the others meanwhile
        break;
      } else {
        idle_pause();
      }
    }
    while (!coord.clients_done()) {
      tend();
      idle_pause();
    }
  } catch (const comm::StallError&) {
    sink.finish();  // a stalled rank ends the job by abort: save every result computed so far first
    throw;
  } catch (const pipeline::WireIntegrityError&) {
    // Every result so far passed its checksums: save them, and those the other replicas still send.
    coord.stop_handing_out();
    while (!coord.clients_done()) {
      coord.serve(remote);
      idle_pause();
    }
    sink.finish();
    throw;
  } catch (...) {
    // The other replicas must still learn that the job ends, or they would wait for work forever.
    coord.stop_handing_out();
    while (!coord.clients_done()) {
      coord.serve([](io::ResultRecord&&) {});
      idle_pause();
    }
    throw;
  }
  const double seconds = now_seconds() - t0;
  if (retuner) sink.record_attribute("decode_groups", planning::with_retunes(groups, retuner->retunes()).dump());
  sink.finish();
  progress.update(sink.done(), generated_tokens);
  progress.finish();
  const int64_t total = static_cast<int64_t>(records.size());
  // The summary line benchmarks read: fixed wording, keep it stable (benchmarks/scaling parse the failed
  // count, the seconds, both rates and the micro-batches). Finished and failed count this run's prompts,
  // left those without a result, earlier those a --resume found done.
  std::printf("done: %zu prompts (%lld failed), %lld finished, %lld left, %lld earlier, %lld prompt tokens, %lld "
              "generated tokens in %.3f s: %.1f prompt tok/s, %.1f generated tok/s, %lld micro-batches\n",
              records.size(), static_cast<long long>(failed), static_cast<long long>(finished_ok),
              static_cast<long long>(total - sink.done()), static_cast<long long>(already),
              static_cast<long long>(prompt_tokens), static_cast<long long>(generated_tokens), seconds,
              prompt_tokens / seconds, generated_tokens / seconds, static_cast<long long>(sched.micro_batches_sent()));
  // What the ring computed of the prompts (this replica's share): a prompt's n samples share one prefill,
  // and prompts take the rows of a prefix some slot holds (/trace@prompt_tokens_reused sums the replicas).
  std::printf("prefill: %lld prompt tokens computed, %lld taken from the prefix cache\n",
              static_cast<long long>(sched.prompt_tokens_computed()), static_cast<long long>(sched.prompt_tokens_reused()));
  if (sopt.draft_max > 0) print_speculation(sched.speculation());
  if (retuner) std::printf("decode groups: %zu re-tunes between waves\n", retuner->retunes().size());
  counters = job_counters(sched);
  if (sink.done() < total) {
    if (!stopping)
      throw std::runtime_error("internal error: " + std::to_string(total - sink.done()) + " prompts got no result");
    GLACIER_LOG_WARN("stopped by %s after %lld of %zu prompts; results are flushed: rerun with --resume to finish",
                     describe_stop().c_str(), static_cast<long long>(sink.done()), records.size());
    return kExitInterrupted;
  }
  const int64_t ran = total - already;
  if (ran > 0 && failed == ran) {
    GLACIER_LOG_ERROR("every one of the %lld prompts failed (see their error rows): the model or the prompt file is at fault",
                      static_cast<long long>(ran));
    return kExitAllPromptsFailed;
  }
  return kExitOk;
}

// The driver of replica k > 0: runs the prompts world rank 0 hands out and sends their results back.
int serve_replica(const JobOptions& o, const model::Tokenizer& tok, const ChatSetup& chat, pipeline::Ring& ring,
                  const pipeline::SchedulerOptions& sopt, comm::Channel& world, io::TraceCounters& counters,
                  const planning::DecodeGroupPlan& groups) {
  PromptBook book(o, tok, chat);
  WorkClient client(world, 0);
  pipeline::Scheduler sched(
      sopt, ring, [&](const pipeline::SequenceOutcome& out) { return book.ends(out); },
      [&](pipeline::SequenceOutcome&& out) {
        std::vector<io::ResultRecord> rows = book.result(out);
        if (!rows.empty()) client.send_results(rows);
      });
  std::optional<pipeline::DecodeGroupRetuner> retuner = planning::make_retuner(groups);
  if (retuner) retune_between_waves(sched, *retuner);
  auto feed = [&](const std::vector<int32_t>& indices) {
    for (int32_t i : indices) {
      std::vector<io::ResultRecord> err = book.add(i, sched);
      if (!err.empty()) client.send_results(err);
    }
  };
  bool stopping = false;
  sched.set_drain_check([&] {
    if (stop_requested()) stopping = true;
    if (stopping) return true;
    feed(client.poll(std::max(0, queue_room(sopt, sched))));
    return false;
  });
  try {
    while (!stopping) {
      if (sched.queued() == 0) {
        const std::vector<int32_t> got = client.wait(sopt.n_slots);
        if (got.empty()) break;
        feed(got);
      }
      if (sched.queued() > 0) sched.run();
    }
  } catch (const comm::StallError&) {
    throw;
  } catch (...) {
    client.finish();
    throw;
  }
  client.finish();
  counters = job_counters(sched);
  return stopping ? kExitInterrupted : kExitOk;
}

}  // namespace

int run_job(const JobOptions& o, comm::Channel& ch) {
  const std::string started_at = utc_timestamp();
  log::set_level(log::parse_level(o.log_level).value_or(log::Level::Info));  // validated by parse_options
  // Stop signals are installed by main before MPI_Init: any rank's request reaches rank 0 (comm's stop
  // relay), which drains the queue; the others follow its shutdown.
  pipeline::TraceLog trace;
  RankSetup s;
  std::unique_ptr<model::Tokenizer> tok;
  // Each setup step ends with every rank agreeing on the first error: one message, every rank exits.
  // A stop signal during start-up ends the job at the next step (nothing has run yet, nothing is lost):
  // waiting for the ring to start would hold a node for the rest of a load that may take minutes.
  auto agreed_step = [&](const std::function<void()>& step) {
    std::optional<std::string> error;
    try {
      step();
    } catch (const InputError& e) {
      error = e.what();
    }
    if (auto agreed = ch.agree_on_error(error)) throw InputError(*agreed);
    const std::vector<int64_t> stops = ch.allgather(stop::local_signal());
    for (size_t r = 0; r < stops.size(); ++r)
      if (stops[r] != 0)
        throw JobFailed(std::string(stop::signal_name(static_cast<int>(stops[r]))) + " to rank " + std::to_string(r) +
                            " during start-up, before any prompt ran: nothing to save; run the job again (with "
                            "--resume if --out holds an earlier run's results)",
                        kExitInterrupted);
  };
  // Every phase up to the last rank's "ready" is reported to the start-up watchdog (main started it).
  comm::startup::phase("reading the model's metadata");
  agreed_step([&] { s = read_model(o, ch); });
  comm::startup::phase("planning the layer split");
  agreed_step([&] { plan_layout(o, ch, s); });
  comm::startup::phase("aligning clocks");
  // Before the injected send delay is configured: it would widen every round trip of the alignment.
  const comm::ClockOffset clock = comm::offset_to_root(ch, now_seconds);
  comm::startup::phase("setting up the channels");
  ch.configure_faults({o.stall_timeout, o.inject_latency_ms / 1000.0});
  // Each replica's pipeline runs on its own channel; the world channel carries the replicas' work queue.
  // Expert group members other than the leader are on no ring: each gets a channel of its own.
  const bool leader = s.expert_index == 0;
  std::unique_ptr<comm::Channel> replica_channel = ch.split(leader ? s.replica : s.replicas + ch.rank());
  comm::Channel& pipe = *replica_channel;
  // A group's members, ranked in world order: the leader first.
  if (s.expert_parallel > 1) s.group_channel = ch.split(ch.rank() % s.ring_ranks);
  pipeline::WireIntegrity integrity{ch.rank() - pipe.rank(), 0};  // reports name world ranks
  agreed_step([&] { integrity.corrupt_send = pipeline::corrupt_send_from_env(ch.rank(), ch.size()); });
  const bool driver = leader && pipe.rank() == 0;
  comm::startup::phase("starting threads");
  agreed_step([&] { start_threads(o, ch, s); });
  if (o.partition == "measured" && o.layers.empty()) {
    comm::startup::phase("calibrating (--partition measured)");
    const SplitSetting set{s.file.get(), memory_shape(o, s), s.memory.hosts, s.memory.available, s.n_stages,
                           s.stage_index, s.split};
    std::vector<double> measured;
    agreed_step([&] { measured = measure_speeds(o, ch, set, *s.pool, s.throttle); });
    agreed_step([&] { s.split = choose_measured_split(o, ch, set, measured); });
  }
  comm::startup::phase("loading layers " + std::to_string(s.split[s.stage_index].first) + ":" +
                       std::to_string(s.split[s.stage_index].last));
  agreed_step([&] {
    load_rank(o, ch, s);
    if (driver) tok = model::Tokenizer::from_gguf(*s.file);
  });
  comm::startup::phase("allocating the KV cache");
  // Every stage must hold the same slots: the smallest any rank's memory allows.
  const std::vector<int64_t> slots = ch.allgather(s.n_slots);
  s.n_slots = static_cast<int32_t>(*std::min_element(slots.begin(), slots.end()));
  if (ch.rank() == 0) {
    GLACIER_LOG_INFO("%d KV slots of %d positions, micro-batches of up to %d tokens", s.n_slots, s.n_ctx, s.ubatch);
    if (s.replicas > 1) GLACIER_LOG_INFO("%d pipeline replicas of %d stages", s.replicas, s.n_stages);
  }
  s.stage = std::make_unique<compute::TransformerStage>(s.cfg, std::move(s.shard), s.n_slots, s.n_ctx, s.ubatch, *s.pool);
  if (s.group_channel) {
    s.group = std::make_unique<pipeline::ChannelExpertGroup>(*s.group_channel, s.ubatch, s.cfg.n_embd);
    s.stage->set_expert_group(s.group.get());
  }
  if (const std::string draft = draft_model_path(o); !draft.empty()) {
    comm::startup::phase("loading the draft model (--speculate)");
    agreed_step([&] {
      if (driver) s.draft = std::make_unique<DraftModel>(draft, *s.file, s.n_slots, s.n_ctx, s.ubatch, *s.pool);
    });
  }
  comm::startup::phase("timing a hop and decode steps (--decode-groups)");
  // The leaders time decode steps on their stages while the other members of their groups follow.
  planning::DecodeGroupPlan groups;
  if (leader) {
    groups = plan_decode_groups(o, pipe, *s.stage, s.n_slots, s.throttle);
    if (s.group) s.group->release_members();
  } else {
    s.group->follow_leader(*s.stage);
  }
  s.decode_groups = groups.groups;
  if (driver) GLACIER_LOG_INFO("%s%s", s.replicas > 1 ? ("replica " + std::to_string(s.replica) + ": ").c_str() : "",
                               groups.describe().c_str());

  const std::vector<std::string> hosts = ch.allgather_strings(ch.host_name());
  start_trace_clock(ch, clock, trace);
  // Only a results file records (and --resume compares) the model's digest.
  std::string model_sha256;
  if (!o.h5_out.empty()) {
    comm::startup::phase("rank 0 hashing the model (SHA-256, cached for later runs)");
    agreed_step([&] {
      // A shard set records its source's digest: its results resume and compare with the whole file's.
      if (ch.rank() == 0) model_sha256 = s.shards ? s.shards->source_sha256 : model_sha256_reporting(o.model);
    });
  }
  comm::startup::finish();  // every rank is ready: the ring's stall watchdog takes over
  const pipeline::WireCodec codec = pipeline::parse_codec(o.wire);
  const pipeline::SchedulerOptions sopt = scheduler_options(o, s, s.n_stages);
  int code = kExitOk;
  io::TraceCounters counters;  // this replica driver's (a perplexity run's chunks are not counted)
  std::optional<std::string> driver_error;
  if (driver) {
    std::unique_ptr<pipeline::Ring> ring;
    pipeline::PipelineRing* pipeline_ring = nullptr;
    if (s.n_stages == 1) {
      auto r = std::make_unique<pipeline::LocalRing>(*s.stage, sopt.max_in_flight);
      r->set_trace(&trace);
      r->set_throttle(s.throttle);
      ring = std::move(r);
    } else {
      auto r = std::make_unique<pipeline::PipelineRing>(pipe, *s.stage, s.n_stages, sopt.max_in_flight, codec, trace,
                                                        s.throttle, integrity);
      pipeline_ring = r.get();
      ring = std::move(r);
    }
    // A failure while driving (a refused --resume, an unreadable prompt file, a full disk) must still
    // end the ring cleanly, or the other ranks would wait forever for the shutdown message.
    try {
      const ChatSetup chat = choose_chat_template(o, s.file->find_string("tokenizer.chat_template"));
      const auto provenance = [&] {
        return describe_run(o, *s.file, {pipeline::format_layer_split(s.split), ch.size(), hosts, s.n_ctx, chat,
                                         started_at, model_sha256, groups.to_json().dump()});
      };
      if (ch.rank() != 0) {
        code = serve_replica(o, *tok, chat, *ring, sopt, ch, counters, groups);
      } else if (o.mode == "perplexity") {
        code = drive_perplexity(o, *tok, *ring, sopt, provenance());
      } else {
        std::vector<int> clients;
        for (int k = 1; k < s.replicas; ++k) clients.push_back(k * s.n_stages);
        code = drive_prompts(o, *tok, chat, *ring, sopt, provenance(), ch, clients, counters, groups);
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
    if (s.group) s.group->release_members();
  } else if (leader) {
    pipeline::run_stage_loop(pipe, *s.stage, s.stage_index, s.n_stages, codec, trace, s.throttle, integrity);
    if (s.group) s.group->release_members();
  } else {
    s.group->follow_leader(*s.stage);  // until the leader's ring has shut down
  }
  GLACIER_LOG_INFO("peak RSS %.1f MiB", sys::peak_rss_bytes() / 1048576.0);
  // Every rank learns whether a driver failed; then nobody touches the output file again.
  const std::vector<int64_t> codes = ch.allgather(code);
  if (auto failed = ch.agree_on_error(driver_error)) throw JobFailed(*failed, static_cast<int>(codes[0]));
  ch.barrier();
  if (!o.h5_out.empty()) write_trace(o.h5_out, ch, trace, counters);
  return static_cast<int>(codes[0]);  // the job's outcome is rank 0's: it holds the results
}

}  // namespace glacier::app
