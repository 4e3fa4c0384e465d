// The job on every rank, as wiring: all ranks open the model and agree on any setup error before the ring
// starts (one message, every rank exits non-zero); then each replica's first rank drives its ring (the
// prompts: app/driver.h; a perplexity: app/perplexity_driver.h) and the other ranks run their stage loop.
#include "app/job.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "app/decode_group_tuning.h"
#include "app/draft_model.h"
#include "app/driver.h"
#include "app/input_checks.h"
#include "app/measured_split.h"
#include "app/output_guard.h"
#include "app/perplexity_driver.h"
#include "app/provenance.h"
#include "app/requests.h"
#include "app/result_sink.h"
#include "app/trace_output.h"
#include "comm/startup_watchdog.h"
#include "compute/transformer_stage.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/shard_set.h"
#include "model/tokenizer.h"
#include "pipeline/expert_group_channel.h"
#include "pipeline/local_ring.h"
#include "pipeline/pipeline_ring.h"
#include "pipeline/scheduler.h"
#include "pipeline/stage_loop.h"
#include "pipeline/wire.h"
#include "planning/layout.h"
#include "planning/memory_fit.h"
#include "planning/partition.h"
#include "sys/binding.h"
#include "sys/memory.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/stop_request.h"

namespace glacier::app {
namespace {

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
  compute::ComputeThrottle throttle;  // --slow-rank
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
  const uint64_t ring_bytes = pipeline::max_forward_bytes(s.ubatch, s.cfg.n_embd) + pipeline::max_back_bytes(s.ubatch);
  // A member of an expert group holds its share of the experts only (its leader, on the ring, stands for it).
  const model::WeightBytes held = s.expert_parallel > 1 ? model::expert_member_bytes(s.bytes, s.expert_parallel) : s.bytes;
  return planning::memory_shape(s.cfg, held, s.n_ctx, s.ubatch, o.slots, o.decode_groups, ring_bytes);
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
    planning::check_fixed_split_options(split_request(o), o.partition_from, o.model, s.shards->n_stages(), s.ring_ranks,
                                        o.expert_parallel);
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
  const std::string split = planning::format_layer_split(s.split);
  if (s.shards) {
    GLACIER_LOG_INFO("layer split %s (the shard set %s, cut from %s)", split.c_str(), s.shards->manifest_path.c_str(),
                     s.shards->source_name.c_str());
    return;
  }
  if (!o.layers.empty()) {
    GLACIER_LOG_INFO("layer split %s (by hand, --layers)", split.c_str());
    return;
  }
  if (o.partition == planning::Partition::Bytes) {
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
                   option_word(o.partition),
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
  if (ch.rank() == 0 && o.partition != planning::Partition::Measured) log_split(o, s);
}

// Pins the rank and starts its threads (before a calibration, which times them).
void start_threads(const JobOptions& o, comm::Channel& ch, RankSetup& s) {
  const sys::BindingPlan plan = sys::plan_binding(o.bind, ch.local_rank(), ch.local_size(), o.threads);
  sys::bind_this_process(plan);
  const int threads = o.threads > 0 ? o.threads : sys::default_threads(plan, ch.local_rank(), ch.local_size());
  s.pool = std::make_unique<ThreadPool>(threads, [plan](int t) { sys::bind_this_thread(plan, t); });
  s.binding = plan.description;
  if (ch.rank() == o.slow_rank) {
    s.throttle = compute::ComputeThrottle(o.slow_factor);
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
  opt.share_prompt = o.share_prefill;
  opt.prefix_sharing = o.prefix_sharing && o.mode != JobMode::Perplexity;  // a perplexity's chunks share nothing
  opt.draft_max = o.speculate != Speculation::Off ? o.draft_max : 0;
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

}  // namespace

int run_job(const JobOptions& o, comm::Channel& ch) {
  const std::string started_at = utc_timestamp();
  log::set_level(o.log_level);
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
  if (o.partition == planning::Partition::Measured && o.layers.empty()) {
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
  const int64_t split_at_start = s.stage->split_micro_batches();  // the decode steps timed above
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
      auto r = std::make_unique<pipeline::PipelineRing>(pipe, *s.stage, s.n_stages, sopt.max_in_flight, o.wire, trace,
                                                        s.throttle, integrity);
      pipeline_ring = r.get();
      ring = std::move(r);
    }
    // A failure while driving (a refused --resume, an unreadable prompt file, a full disk) must still
    // end the ring cleanly, or the other ranks would wait forever for the shutdown message.
    try {
      const ChatSetup chat = choose_chat_template(o, s.file->find_string("tokenizer.chat_template"));
      const auto provenance = [&] {
        return describe_run(o, *s.file, {planning::format_layer_split(s.split), ch.size(), hosts, s.n_ctx, chat,
                                         started_at, model_sha256, groups.to_json().dump()});
      };
      if (o.mode == JobMode::Perplexity && ch.rank() == 0) {
        code = drive_perplexity(o, *tok, *ring, sopt, provenance());
      } else {
        Driver prompts({o, *tok, chat, *ring, sopt, ch, groups});
        if (ch.rank() != 0) {
          code = prompts.serve(0);
        } else {
          std::vector<int> clients;  // the other replicas' drivers, by world rank
          for (int k = 1; k < s.replicas; ++k) clients.push_back(k * s.n_stages);
          code = prompts.lead(provenance(), clients);
        }
        counters = prompts.counters();
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
    pipeline::run_stage_loop(pipe, *s.stage, s.stage_index, s.n_stages, o.wire, trace, s.throttle, integrity);
    if (s.group) s.group->release_members();
  } else {
    s.group->follow_leader(*s.stage, &trace);  // until the leader's ring has shut down
  }
  if (s.group && leader)
    GLACIER_LOG_INFO("stage %d's expert group split %lld of the job's micro-batches between its %d members by sequence",
                     s.stage_index, static_cast<long long>(s.stage->split_micro_batches() - split_at_start), s.expert_parallel);
  GLACIER_LOG_INFO("peak RSS %.1f MiB", sys::peak_rss_bytes() / 1048576.0);
  // Every rank learns whether a driver failed; then nobody touches the output file again.
  const std::vector<int64_t> codes = ch.allgather(code);
  if (auto failed = ch.agree_on_error(driver_error)) throw JobFailed(*failed, static_cast<int>(codes[0]));
  ch.barrier();
  if (!o.h5_out.empty()) write_trace(o.h5_out, ch, trace, counters);
  return static_cast<int>(codes[0]);  // the job's outcome is rank 0's: it holds the results
}

}  // namespace glacier::app
