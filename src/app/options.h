// The job's options: one struct, filled from the command line and an optional INI file
// (--config; the command line wins), checked before any model is loaded.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/chat_template.h"
#include "pipeline/wire.h"
#include "planning/layout.h"
#include "sys/binding.h"
#include "util/log.h"

namespace glacier::app {

// --mode.
enum class JobMode { Generate, Score, Perplexity };
// --speculate off | lookup | draft:PATH (the PATH in JobOptions::draft_model).
enum class Speculation { Off, Lookup, DraftModel };

// The sampling settings a row runs with: the job's defaults (JobOptions, --max-tokens and the rest) and
// a prompt's resolution of them (PromptSampling, app/prompt_sampling.h) share this one list of fields.
struct SamplingSettings {
  int32_t max_tokens = 128;
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  float repetition_penalty = 1.0f;  // 1 = off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t min_tokens = 0;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, bias), ascending ids
  bool include_stop_str_in_output = false;
  int32_t top_logprobs = 0;  // alternatives per generated token (0..20) for lines that do not say
  int32_t n = 1;          // samples per prompt (generate mode), one prefill shared by them
};

struct JobOptions : SamplingSettings {
  std::string model;
  std::string prompts;
  std::string jsonl_out;
  std::string h5_out;
  JobMode mode = JobMode::Generate;
  bool prefix_sharing = true;  // --prefix-sharing on | off: prompts reuse the KV rows of a common prefix (same results)
  // --speculate: speculative decoding of unpenalized rows (the same results); draft_model: draft:PATH's PATH.
  Speculation speculate = Speculation::Off;
  std::string draft_model;
  int32_t draft_max = 4;          // tokens drafted per verified decode step (1..kMaxDraftTokens)
  bool share_prefill = true;  // --n-prefill once | each: whether the n samples share one prefill (same results)
  int32_t ctx = 0;        // 0 = the model's training context, at most kDefaultMaxCtx
  int32_t slots = 0;      // 0 = sized from free memory
  int32_t ubatch = 512;
  // Decode micro-batches kept in a pipeline at once (0 = one a stage, kDecodeGroupsAuto = chosen at start-up
  // from measured hop and step times, app/decode_group_tuning.h and planning/decode_group_plan.h).
  int32_t decode_groups = -1;
  int32_t threads = 0;    // 0 = this rank's share of the host's cores
  bool oversubscribe_threads = false;  // allow --threads above the host's hardware threads
  sys::Binding bind = sys::Binding::Core;
  int32_t replicas = 1;   // pipelines the ranks form (0 = auto: the shortest pipeline that fits memory)
  // Ranks a stage's MoE experts are split over (each holds the experts e with e % E == its index in the
  // group); ranks = stages x expert_parallel x replicas.
  int32_t expert_parallel = 1;
  std::vector<model::LayerRange> layers;  // --layers 0:2,2:5 by hand; empty: chosen by --partition
  planning::Partition partition = planning::Partition::Bytes;  // how the split is chosen without --layers
  std::string partition_from;       // an earlier run's results file: measured speeds from its trace
  int32_t slow_rank = -1;           // --slow-rank R:FACTOR (testing aid): rank R computes FACTOR times slower
  double slow_factor = 1.0;
  pipeline::WireCodec wire = pipeline::WireCodec::F32;
  int32_t flush_every = 16;
  double flush_seconds = 30.0;
  double max_memory_gib = 0.0;  // memory the job may use on each host (0 = what the host and its cgroups allow)
  double stall_timeout = 300.0;  // seconds without a completed transfer before the ranks are checked (0 = off)
  double inject_latency_ms = 0.0;  // held before every point-to-point send (scaling studies)
  bool resume = false;
  bool no_bos = false;
  std::optional<model::ChatTemplate> chat_template;  // none: recognized from the model's tokenizer.chat_template
  log::Level log_level = log::Level::Info;
  std::string config_file;
  std::vector<std::string> command_line;  // argv as given (recorded as provenance)
};

// --decode-groups auto (the default).
constexpr int32_t kDecodeGroupsAuto = -1;

// Bounds of the numeric options, shared with the checks that need the host or the prompt file.
constexpr int32_t kMaxCtx = 1 << 20;       // positions a sequence; keeps KV-cache byte counts far from overflow
constexpr int32_t kMaxSlots = 1 << 16;     // sequences in flight (and so decode groups, which need a slot each)
constexpr int32_t kMaxThreads = 1 << 12;   // compute threads a rank, even with --oversubscribe-threads
constexpr int32_t kMaxExpertParallel = 1 << 10;  // ranks an expert group spans (more than any model has experts)
constexpr double kMaxMemoryGiB = 1 << 20;  // 1 PiB a host: no host has more, and bytes stay far below 2^64
constexpr int32_t kMaxDraftTokens = 64;    // a verify chunk is 1 + this many rows of logits on the last stage
constexpr double kMaxSeconds = 1e7;        // ~116 days: a longer flush or stall interval is a typo

// The PATH of --speculate draft:PATH, or "" for the other draft sources.
std::string draft_model_path(const JobOptions& o);

// The words the command line gives these options (the provenance records them, messages quote them).
const char* option_word(JobMode mode);
const char* option_word(sys::Binding bind);
const char* option_word(planning::Partition partition);
const char* option_word(pipeline::WireCodec wire);
const char* option_word(log::Level level);
const char* prefix_sharing_word(bool on);      // on | off
const char* n_prefill_word(bool shared);       // once | each
std::string speculate_word(const JobOptions& o);  // off | lookup | draft:PATH

// Parses argv; returns nullopt after printing --help or --version. Throws InputError for unknown,
// malformed or contradictory options (naming the option and, for INI files, the file).
std::optional<JobOptions> parse_options(int argc, const char* const* argv);

}  // namespace glacier::app
