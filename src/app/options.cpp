// Command-line and INI option parsing with Boost.Program_options, and the cross-option checks that
// must fail before a model is loaded.
#include "app/options.h"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <sstream>

#include "compute/top_logprobs.h"
#include "io/prompt_record.h"
#include "model/chat_template.h"
#include "planning/partition.h"
#include "util/error.h"
#include "util/log.h"
#include "version/build_info.h"

namespace po = boost::program_options;

namespace glacier::app {
namespace {

// The words of the options that take one of a few: the command line's text and the value it stands for.
template <typename T>
struct Word {
  const char* text;
  T value;
};
constexpr Word<JobMode> kModes[] = {{"generate", JobMode::Generate}, {"score", JobMode::Score},
                                    {"perplexity", JobMode::Perplexity}};
constexpr Word<bool> kPrefixSharing[] = {{"on", true}, {"off", false}};
constexpr Word<bool> kNPrefill[] = {{"once", true}, {"each", false}};
constexpr Word<Speculation> kSpeculation[] = {{"off", Speculation::Off}, {"lookup", Speculation::Lookup}};
constexpr Word<sys::Binding> kBindings[] = {
    {"core", sys::Binding::Core}, {"numa", sys::Binding::Numa}, {"none", sys::Binding::None}};
constexpr Word<planning::Partition> kPartitions[] = {{"bytes", planning::Partition::Bytes},
                                                     {"memory", planning::Partition::Memory},
                                                     {"measured", planning::Partition::Measured}};
constexpr Word<pipeline::WireCodec> kWires[] = {{"f32", pipeline::WireCodec::F32}, {"f16", pipeline::WireCodec::F16},
                                                {"bf16", pipeline::WireCodec::BF16}, {"int8", pipeline::WireCodec::Int8}};
constexpr Word<log::Level> kLogLevels[] = {{"debug", log::Level::Debug}, {"info", log::Level::Info},
                                           {"warn", log::Level::Warn}, {"error", log::Level::Error}};

template <typename T, size_t N>
std::optional<T> value_of(const Word<T> (&words)[N], const std::string& text) {
  for (const Word<T>& w : words)
    if (text == w.text) return w.value;
  return std::nullopt;
}

template <typename T, size_t N>
const char* text_of(const Word<T> (&words)[N], T value) {
  for (const Word<T>& w : words)
    if (w.value == value) return w.text;
  GLACIER_ASSERT(false, "an option value without a word");
  return "";
}

// The option words as given, turned into JobOptions' values by check() where it checks them, so that of
// several bad options the same one is reported first as when they were compared as text.
struct Words {
  std::string mode = "generate";
  std::string n_prefill = "once";
  std::string prefix_sharing = "on";
  std::string speculate = "off";
  std::string bind = "core";
  std::string partition = "bytes";
  std::string wire = "f32";
  std::string log_level = "info";
  std::string chat_template;  // empty: none given
  std::string layers;
};

// "--replicas": a count >= 1, or "auto" (0).
int32_t parse_replicas(const std::string& v) {
  if (v == "auto") return 0;
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 1 || n > 1 << 20)
    throw InputError("option --replicas: expected a count >= 1 or 'auto', found '" + v + "'");
  return static_cast<int32_t>(n);
}

// "--decode-groups": a count in 0..kMaxSlots (0 = one a stage), or "auto" (kDecodeGroupsAuto).
int32_t parse_decode_groups(const std::string& v) {
  if (v == "auto") return kDecodeGroupsAuto;
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 0 || n > kMaxSlots)
    throw InputError("option --decode-groups: expected a count in 0.." + std::to_string(kMaxSlots) + " or 'auto', found '" +
                     v + "'");
  return static_cast<int32_t>(n);
}

// "--seed": an unsigned 64-bit decimal, read strictly: no sign (strtoull would wrap "-1" to 2^64-1),
// no spaces, no hex, nothing past the digits, nothing above 2^64-1.
uint64_t parse_seed(const std::string& v) {
  const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  const unsigned long long n = digits ? std::strtoull(v.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE)
    throw InputError("option --seed: expected an integer in 0..18446744073709551615, found '" + v + "'");
  return static_cast<uint64_t>(n);
}

// Splits the repeatable list options at commas ("--stop-token-ids 2,13 --stop-token-ids 7").
std::vector<std::string> list_items(const std::vector<std::string>& values) {
  std::vector<std::string> items;
  for (const std::string& v : values) {
    size_t from = 0;
    for (;;) {
      const size_t comma = v.find(',', from);
      items.push_back(v.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  }
  return items;
}

// A token id written in decimal, 0..2^31-1 (the vocabulary bound is checked once the model is read).
bool parse_token_id(const std::string& v, int32_t& id) {
  if (v.empty() || v.size() > 10 || v.find_first_not_of("0123456789") != std::string::npos) return false;
  const long long n = std::stoll(v);
  if (n > std::numeric_limits<int32_t>::max()) return false;
  id = static_cast<int32_t>(n);
  return true;
}

// "--stop-token-ids": distinct token ids, at most io::kMaxStopTokenIds.
std::vector<int32_t> parse_stop_token_ids(const std::vector<std::string>& values) {
  std::vector<int32_t> ids;
  for (const std::string& item : list_items(values)) {
    int32_t id = 0;
    if (!parse_token_id(item, id) || std::find(ids.begin(), ids.end(), id) != ids.end() ||
        ids.size() == io::kMaxStopTokenIds)
      throw InputError("option --stop-token-ids: expected at most " + std::to_string(io::kMaxStopTokenIds) +
                       " distinct token ids (integers >= 0, comma-separated or repeated), found '" + item + "'" +
                       (ids.size() == io::kMaxStopTokenIds ? " past the limit" : ""));
    ids.push_back(id);
  }
  return ids;
}

// "--logit-bias ID:BIAS,...": distinct ids, biases in [-100, 100], at most io::kMaxLogitBiasEntries.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const std::vector<std::string>& values) {
  std::vector<std::pair<int32_t, float>> out;
  for (const std::string& item : list_items(values)) {
    const size_t colon = item.find(':');
    int32_t id = 0;
    char* end = nullptr;
    const std::string bias_text = colon == std::string::npos ? "" : item.substr(colon + 1);
    const double bias = std::strtod(bias_text.c_str(), &end);
    const bool id_ok = colon != std::string::npos && parse_token_id(item.substr(0, colon), id);
    const bool repeated = std::any_of(out.begin(), out.end(), [id](const auto& e) { return e.first == id; });
    if (!id_ok || bias_text.empty() || *end != '\0' || !(bias >= -100.0 && bias <= 100.0) || repeated ||
        out.size() == io::kMaxLogitBiasEntries)
      throw InputError("option --logit-bias: expected at most " + std::to_string(io::kMaxLogitBiasEntries) +
                       " entries ID:BIAS with distinct token ids >= 0 and biases in [-100, 100] (comma-separated or "
                       "repeated, e.g. 13:-100,29:2.5), found '" + item + "'");
    out.emplace_back(id, static_cast<float>(bias));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "--slow-rank R:FACTOR": a rank >= 0 and a factor in [1, kMaxSlowFactor].
constexpr const char* kDraftModelPrefix = "draft:";  // --speculate draft:PATH
constexpr double kMaxSlowFactor = 1000.0;  // beyond this a test would only wait
void parse_slow_rank(const std::string& v, JobOptions& o) {
  const size_t colon = v.find(':');
  char* end_rank = nullptr;
  char* end_factor = nullptr;
  const std::string rank = colon == std::string::npos ? v : v.substr(0, colon);
  const std::string factor = colon == std::string::npos ? "" : v.substr(colon + 1);
  const long r = std::strtol(rank.c_str(), &end_rank, 10);
  const double f = std::strtod(factor.c_str(), &end_factor);
  if (rank.empty() || *end_rank != '\0' || r < 0 || r > 1 << 20 || factor.empty() || *end_factor != '\0' ||
      !(f >= 1.0 && f <= kMaxSlowFactor))
    throw InputError("option --slow-rank: expected RANK:FACTOR with a rank >= 0 and a factor in [1, " +
                     std::to_string(static_cast<int>(kMaxSlowFactor)) + "], e.g. 1:3, found '" + v + "'");
  o.slow_rank = static_cast<int32_t>(r);
  o.slow_factor = f;
}

po::options_description describe(JobOptions& o, Words& w) {
  po::options_description job("Job");
  job.add_options()
      ("model,m", po::value(&o.model), "GGUF model file, or the directory of a shard set (glacier_shard: each rank opens only its stage's file)")
      ("prompts,p", po::value(&o.prompts), "prompt file: .txt (one prompt a line) or .jsonl (records or OpenAI batch lines); "
                                           "for --mode perplexity, a text file")
      ("jsonl", po::value(&o.jsonl_out), "write results as JSON lines here, in input order")
      ("out,o", po::value(&o.h5_out), "write results and traces to this HDF5 file")
      ("mode", po::value(&w.mode)->default_value(w.mode), "generate | score | perplexity")
      ("resume", po::bool_switch(&o.resume), "skip prompts already finished in --out and complete the rest")
      ("config", po::value(&o.config_file), "INI file with any of these options (the command line wins)");
  po::options_description sampling("Sampling (per-prompt fields in .jsonl override these)");
  sampling.add_options()
      ("max-tokens,n", po::value(&o.max_tokens)->default_value(o.max_tokens), "tokens to generate at most")
      ("temperature", po::value(&o.temperature)->default_value(o.temperature, "0"), "0 = greedy")
      ("top-k", po::value(&o.top_k)->default_value(o.top_k), "keep the k most likely tokens (0 = off)")
      ("top-p", po::value(&o.top_p)->default_value(o.top_p, "1"), "nucleus sampling threshold (1 = off)")
      ("min-p", po::value(&o.min_p)->default_value(o.min_p, "0"), "drop tokens below min-p x the best probability (0 = off)")
      ("seed", po::value<std::string>()->default_value("0")->notifier([&o](const std::string& v) { o.seed = parse_seed(v); }),
       "random seed, 0..2^64-1 (draws are keyed by seed, prompt id and step)")
      ("stop", po::value(&o.stop)->composing(), "stop string (repeatable)")
      ("include-stop-str-in-output", po::bool_switch(&o.include_stop_str_in_output),
       "keep the stop string that ended a row in its text (as vLLM's include_stop_str_in_output)")
      ("stop-token-ids", po::value<std::vector<std::string>>()->composing()->notifier([&o](const std::vector<std::string>& v) {
         o.stop_token_ids = parse_stop_token_ids(v);
       }),
       "token ids that end a row with finish_reason stop, kept in its tokens (comma-separated or repeated)")
      ("ignore-eos", po::bool_switch(&o.ignore_eos), "the model's end-of-generation tokens do not end a row")
      ("n", po::value(&o.n)->default_value(o.n),
       "samples per prompt (1..128, generate mode): one prefill, each sample in its own KV slot with its own "
       "random stream; one result row per sample")
      ("n-prefill", po::value(&w.n_prefill)->default_value(w.n_prefill),
       "once: a prompt's n samples share one prefill; each: every sample computes the prompt itself (the "
       "same results, for checking and measuring)")
      ("prefix-sharing", po::value(&w.prefix_sharing)->default_value(w.prefix_sharing),
       "on: a prompt starting with tokens some KV slot already holds (a shared preamble, a scored context) "
       "copies their rows and computes only the rest; off: every prompt computes all of it (the same results)")
      ("speculate", po::value(&w.speculate)->default_value(w.speculate),
       "off | lookup | draft:PATH: speculative decoding of unpenalized rows, greedy or sampled (generate mode): a "
       "decode step also carries up to --draft-max drafted tokens and keeps those its positions accept by "
       "speculative sampling's rejection rule (the same tokens and log-probs as off; penalized rows decode as with "
       "off). lookup drafts the tokens that followed the row's last tokens earlier in its prompt and output; "
       "draft:PATH, a small GGUF model with the same vocabulary, decoded greedily on each pipeline's first rank")
      ("draft-max", po::value(&o.draft_max)->default_value(o.draft_max),
       "tokens drafted per speculative decode step, at most (1..64)")
      ("min-tokens", po::value(&o.min_tokens)->default_value(o.min_tokens),
       "tokens a row generates before anything may end it: end-of-generation and --stop-token-ids ids are "
       "masked until then (at most --max-tokens)")
      ("repetition-penalty", po::value(&o.repetition_penalty)->default_value(o.repetition_penalty, "1"),
       "> 0: a token of the prompt or the output so far has a positive logit divided by it, a negative one "
       "multiplied (1 = off)")
      ("presence-penalty", po::value(&o.presence_penalty)->default_value(o.presence_penalty, "0"),
       "in [-2, 2]: subtracted from the logit of every token the output has so far (0 = off)")
      ("frequency-penalty", po::value(&o.frequency_penalty)->default_value(o.frequency_penalty, "0"),
       "in [-2, 2]: times its count in the output so far, subtracted from a token's logit (0 = off)")
      ("logit-bias", po::value<std::vector<std::string>>()->composing()->notifier([&o](const std::vector<std::string>& v) {
         o.logit_bias = parse_logit_bias(v);
       }),
       "ID:BIAS,...: add BIAS in [-100, 100] to the token's logit before sampling (repeatable)")
      ("top-logprobs", po::value(&o.top_logprobs)->default_value(o.top_logprobs),
       "0..20: per generated token, return the K most likely tokens with their log-probs (as \"top_logprobs\"; "
       "OpenAI batch lines ask in their body instead)")
      ("no-bos", po::bool_switch(&o.no_bos), "do not add BOS to prompts")
      ("chat-template", po::value(&w.chat_template), "template for \"messages\" prompts: chatml | llama3 | llama2 | mistral | "
                                                     "deepseek | deepseek2 | gemma | granite (default: recognized from the model file)");
  po::options_description engine("Engine");
  engine.add_options()
      ("ctx", po::value(&o.ctx)->default_value(o.ctx), "context length per sequence (0 = the model's, at most 4096); "
                                                       "for perplexity, the chunk length")
      ("slots", po::value(&o.slots)->default_value(o.slots), "sequences in flight (KV slots; 0 = sized from free memory)")
      ("ubatch", po::value(&o.ubatch)->default_value(o.ubatch), "tokens per micro-batch")
      ("decode-groups", po::value<std::string>()->default_value("auto")->notifier([&o](const std::string& v) {
         o.decode_groups = parse_decode_groups(v);
       }),
       "decode micro-batches in a pipeline at once: auto (chosen at start-up from the measured hop and step times, "
       "one to two a stage), or a count (0 = one a stage; more hide slow links between ranks); a count is at most "
       "--slots, and the slots sized from memory are at least this many")
      ("threads,t", po::value(&o.threads)->default_value(o.threads),
       "compute threads per rank (0 = the rank's share of the cores); at most the host's hardware threads")
      ("oversubscribe-threads", po::bool_switch(&o.oversubscribe_threads),
       "allow --threads above the host's hardware threads (each rank checks its own host)")
      ("bind", po::value(&w.bind)->default_value(w.bind), "pin ranks and threads: core | numa | none")
      ("replicas", po::value<std::string>()->default_value("1")->notifier([&o](const std::string& v) {
         o.replicas = parse_replicas(v);
       }),
       "pipelines the ranks form, each over np/R ranks, taking prompts from one queue; "
       "auto = the shortest pipeline whose shards fit memory, replicated over the rest")
      ("expert-parallel", po::value(&o.expert_parallel)->default_value(o.expert_parallel),
       "ranks each stage's MoE experts are split over (E): each holds and computes 1/E of them, attention and the "
       "router run on all E; ranks = stages x E x replicas; E must divide the model's experts")
      ("layers", po::value(&w.layers), "layer split by hand, e.g. 0:2,2:5 (default: chosen by --partition)")
      ("partition", po::value(&w.partition)->default_value(w.partition),
       "how the layer split is chosen: bytes (balance weight bytes) | memory (proportional to each rank's memory) | "
       "measured (each rank times a calibration micro-batch; the slowest stage is made as fast as memory allows)")
      ("partition-from", po::value(&o.partition_from),
       "choose the split from the compute speeds in an earlier run's trace (its --out file) instead of calibrating")
      ("slow-rank", po::value<std::string>()->notifier([&o](const std::string& v) { parse_slow_rank(v, o); }),
       "testing aid: rank R sleeps (FACTOR-1) x each of its compute intervals, standing in for a slower machine "
       "(R:FACTOR, e.g. 1:3)")
      ("wire", po::value(&w.wire)->default_value(w.wire), "activation codec between ranks: f32 | f16 | bf16 | int8")
      ("flush-every", po::value(&o.flush_every)->default_value(o.flush_every), "flush results after this many")
      ("flush-seconds", po::value(&o.flush_seconds)->default_value(o.flush_seconds, "30"), "... or after this many seconds")
      ("max-memory-gib", po::value(&o.max_memory_gib)->default_value(o.max_memory_gib, "0"),
       "memory the job may use on each host, in GiB (0 = what /proc/meminfo and cgroup limits allow); "
       "a model whose shards do not fit is refused before loading")
      ("stall-timeout", po::value(&o.stall_timeout)->default_value(o.stall_timeout, "300"),
       "seconds with no message arriving before every rank is checked; a rank that does not answer (stopped, hung) "
       "ends the job, naming it (0 = off)")
      ("inject-latency-ms", po::value(&o.inject_latency_ms)->default_value(o.inject_latency_ms, "0"),
       "hold every message between ranks this long before sending it (simulates a slow link)")
      ("log-level", po::value(&w.log_level)->default_value(w.log_level), "debug | info | warn | error");
  po::options_description all;
  all.add(job).add(sampling).add(engine);
  return all;
}

// A figure as the user would write it ("1.8e+10", "inf"), not std::to_string's fixed six decimals.
std::string shown(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// Checks the options and sets the worded ones from `w`, in one pass: a check may rely on those before it.
void check(JobOptions& o, const Words& w) {
  auto bad = [](const std::string& opt, const std::string& expected, const std::string& found) {
    throw InputError("option --" + opt + ": expected " + expected + ", found " + found);
  };
  // Sets `value` from the option's word, or refuses it naming the words it takes.
  auto take = [&bad](const std::string& opt, const auto& words, const std::string& text, auto& value,
                     const std::string& expected) {
    const auto v = value_of(words, text);
    if (!v) bad(opt, expected, "'" + text + "'");
    value = *v;
  };
  if (o.model.empty()) bad("model", "a GGUF file", "nothing (the option is required)");
  if (o.prompts.empty()) bad("prompts", "a prompt file", "nothing (the option is required)");
  if (o.jsonl_out.empty() && o.h5_out.empty()) bad("out", "--out R.h5 and/or --jsonl R.jsonl", "neither");
  take("mode", kModes, w.mode, o.mode, "generate, score or perplexity");
  const std::string mode = w.mode;  // as messages quote it
  if (o.max_tokens < 0) bad("max-tokens", "a count >= 0", std::to_string(o.max_tokens));
  if (!(o.temperature >= 0.0f && std::isfinite(o.temperature)))
    bad("temperature", "a finite value >= 0", shown(o.temperature));
  if (o.top_k < 0) bad("top-k", "a count >= 0", std::to_string(o.top_k));
  if (o.top_logprobs < 0 || o.top_logprobs > compute::kMaxTopLogprobs)
    bad("top-logprobs", "a count in 0.." + std::to_string(compute::kMaxTopLogprobs), std::to_string(o.top_logprobs));
  if (o.top_logprobs > 0 && o.mode != JobMode::Generate)
    bad("top-logprobs", "0 with --mode " + mode + " (alternatives are returned for generated tokens only)",
        std::to_string(o.top_logprobs));
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) bad("top-p", "a value in (0, 1]", shown(o.top_p));
  if (!(o.min_p >= 0.0f && o.min_p <= 1.0f)) bad("min-p", "a value in [0, 1]", shown(o.min_p));
  if (!(o.repetition_penalty > 0.0f && std::isfinite(o.repetition_penalty)))
    bad("repetition-penalty", "a finite value > 0 (1 = off)", shown(o.repetition_penalty));
  if (!(o.presence_penalty >= -2.0f && o.presence_penalty <= 2.0f))
    bad("presence-penalty", "a value in [-2, 2]", shown(o.presence_penalty));
  if (!(o.frequency_penalty >= -2.0f && o.frequency_penalty <= 2.0f))
    bad("frequency-penalty", "a value in [-2, 2]", shown(o.frequency_penalty));
  if (o.min_tokens < 0 || o.min_tokens > o.max_tokens)
    bad("min-tokens", "a count in 0..--max-tokens (" + std::to_string(o.max_tokens) + ")", std::to_string(o.min_tokens));
  if (o.n < 1 || o.n > io::kMaxSamplesPerPrompt)
    bad("n", "a count in 1.." + std::to_string(io::kMaxSamplesPerPrompt), std::to_string(o.n));
  take("n-prefill", kNPrefill, w.n_prefill, o.share_prefill, "once or each");
  take("prefix-sharing", kPrefixSharing, w.prefix_sharing, o.prefix_sharing, "on or off");
  if (w.speculate.rfind(kDraftModelPrefix, 0) == 0) {
    o.speculate = Speculation::DraftModel;
    o.draft_model = w.speculate.substr(std::string(kDraftModelPrefix).size());
    if (o.draft_model.empty()) bad("speculate", "draft:PATH with the draft model's file", "'" + w.speculate + "'");
  } else {
    take("speculate", kSpeculation, w.speculate, o.speculate, "off, lookup or draft:PATH");
  }
  if (o.speculate != Speculation::Off && o.mode != JobMode::Generate)
    bad("speculate", "off with --mode " + mode + " (only generated tokens are drafted)", "'" + w.speculate + "'");
  if (o.draft_max < 1 || o.draft_max > kMaxDraftTokens)
    bad("draft-max", "a count in 1.." + std::to_string(kMaxDraftTokens), std::to_string(o.draft_max));
  if (o.n > 1 && o.mode != JobMode::Generate)
    bad("n", "1 with --mode " + mode + " (a score or a perplexity has one answer)", std::to_string(o.n));
  if (o.slots > 0 && o.n > o.slots)
    bad("n", "at most --slots (" + std::to_string(o.slots) + "): each sample holds a KV slot", std::to_string(o.n));
  const std::string max_ctx = std::to_string(kMaxCtx), max_slots = std::to_string(kMaxSlots);
  if (o.ctx < 0 || o.ctx > kMaxCtx) bad("ctx", "a length in 0.." + max_ctx, std::to_string(o.ctx));
  if (o.mode == JobMode::Perplexity && o.ctx < 4) bad("ctx", "a chunk length >= 4 with --mode perplexity", std::to_string(o.ctx));
  if (o.slots < 0 || o.slots > kMaxSlots) bad("slots", "a count in 0.." + max_slots, std::to_string(o.slots));
  if (o.ubatch < 1) bad("ubatch", "a count >= 1", std::to_string(o.ubatch));
  if (o.decode_groups < kDecodeGroupsAuto || o.decode_groups > kMaxSlots)
    bad("decode-groups", "a count in 0.." + max_slots + " or 'auto'", std::to_string(o.decode_groups));
  // A decode group is a micro-batch of decoding sequences: more groups than sequences could never fill.
  if (o.slots > 0 && o.decode_groups > o.slots)
    bad("decode-groups", "at most --slots (" + std::to_string(o.slots) + ")", std::to_string(o.decode_groups));
  if (o.threads < 0 || o.threads > kMaxThreads)
    bad("threads", "a count in 0.." + std::to_string(kMaxThreads), std::to_string(o.threads));
  take("bind", kBindings, w.bind, o.bind, "core, numa or none");
  take("wire", kWires, w.wire, o.wire, "f32, f16, bf16 or int8");
  take("partition", kPartitions, w.partition, o.partition, "bytes, memory or measured");
  o.layers = planning::parse_layer_ranges(w.layers);  // its form; the model's layers and the stages are checked with them
  if (!o.layers.empty() && !o.partition_from.empty())
    bad("partition-from", "no --layers (a split by hand)", "both");
  if (!o.layers.empty() && o.partition != planning::Partition::Bytes)
    bad("partition", "bytes (the default) with a split by hand (--layers)", "'" + w.partition + "'");
  if (!o.partition_from.empty() && o.partition != planning::Partition::Measured)
    bad("partition", "measured (or nothing) with --partition-from", "'" + w.partition + "'");
  if (!w.chat_template.empty()) {
    try {
      o.chat_template = model::parse_chat_template_name(w.chat_template);
    } catch (const InputError&) {
      bad("chat-template", std::string("one of ") + model::chat_template_names(), "'" + w.chat_template + "'");
    }
  }
  if (o.expert_parallel < 1 || o.expert_parallel > kMaxExpertParallel)
    bad("expert-parallel", "a count in 1.." + std::to_string(kMaxExpertParallel), std::to_string(o.expert_parallel));
  if (o.expert_parallel > 1 && o.partition == planning::Partition::Measured)
    bad("partition", "bytes or memory with --expert-parallel " + std::to_string(o.expert_parallel) +
                         " (the measured calibration times each rank's layers alone, with every expert)",
        "'measured'");
  if (o.mode == JobMode::Perplexity && o.replicas != 1)
    bad("replicas", "1 with --mode perplexity (its chunks run on one pipeline)", o.replicas == 0 ? "'auto'" : std::to_string(o.replicas));
  // Checked before the GiB become bytes: 1.8e10 GiB or inf would overflow 64 bits.
  if (!(o.max_memory_gib >= 0.0 && o.max_memory_gib <= kMaxMemoryGiB))
    bad("max-memory-gib", "GiB in [0, " + std::to_string(static_cast<int64_t>(kMaxMemoryGiB)) + "]",
        shown(o.max_memory_gib));
  const std::string max_seconds = std::to_string(static_cast<int64_t>(kMaxSeconds));
  if (!(o.stall_timeout >= 0.0 && o.stall_timeout <= kMaxSeconds))
    bad("stall-timeout", "seconds in [0, " + max_seconds + "]", shown(o.stall_timeout));
  if (!(o.flush_seconds >= 0.0 && o.flush_seconds <= kMaxSeconds))
    bad("flush-seconds", "seconds in [0, " + max_seconds + "]", shown(o.flush_seconds));
  if (!(o.inject_latency_ms >= 0.0 && o.inject_latency_ms <= 60000.0))
    bad("inject-latency-ms", "milliseconds in [0, 60000]", shown(o.inject_latency_ms));
  if (o.flush_every < 1) bad("flush-every", "a count >= 1", std::to_string(o.flush_every));
  if (o.resume && o.h5_out.empty()) bad("resume", "an --out HDF5 file to resume from", "no --out");
  if (o.resume && o.mode == JobMode::Perplexity)
    bad("resume", "no --resume with --mode perplexity (its chunks are one measurement: run it again)", "--resume");
  take("log-level", kLogLevels, w.log_level, o.log_level, "debug, info, warn or error");
}

}  // namespace

std::string draft_model_path(const JobOptions& o) {
  return o.speculate == Speculation::DraftModel ? o.draft_model : std::string();
}

const char* option_word(JobMode mode) { return text_of(kModes, mode); }
const char* option_word(sys::Binding bind) { return text_of(kBindings, bind); }
const char* option_word(planning::Partition partition) { return text_of(kPartitions, partition); }
const char* option_word(pipeline::WireCodec wire) { return text_of(kWires, wire); }
const char* option_word(log::Level level) { return text_of(kLogLevels, level); }
const char* prefix_sharing_word(bool on) { return text_of(kPrefixSharing, on); }
const char* n_prefill_word(bool shared) { return text_of(kNPrefill, shared); }
std::string speculate_word(const JobOptions& o) {
  if (o.speculate == Speculation::DraftModel) return kDraftModelPrefix + o.draft_model;
  return text_of(kSpeculation, o.speculate);
}

std::optional<JobOptions> parse_options(int argc, const char* const* argv) {
  JobOptions o;
  Words words;
  o.command_line.assign(argv, argv + argc);
  po::options_description desc = describe(o, words);
  po::options_description cli("glacier_mpi: run a GGUF language model over a prompt file as an MPI job");
  cli.add_options()("help,h", "show this help")("version", "show the version");
  cli.add(desc);
  po::variables_map vm;
  try {
    // No abbreviations: with Boost's default guessing "--te 0.5" would silently set --temperature.
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(argc, argv).options(cli).style(style).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: mpirun -np P glacier_mpi --model M.gguf --prompts P.jsonl --out R.h5 [options]\n\n"
                << cli << "\n";
      return std::nullopt;
    }
    if (vm.count("version")) {
      std::cout << "glacier_mpi " << build_version() << " (commit " << build_commit() << ")\n";
      return std::nullopt;
    }
    if (vm.count("config")) {
      const std::string path = vm["config"].as<std::string>();
      if (!std::filesystem::is_regular_file(path))
        throw InputError("option --config: expected a readable INI file, found no file at '" + path + "'");
      try {
        po::store(po::parse_config_file<char>(path.c_str(), desc), vm);
      } catch (const po::error& e) {
        throw InputError(path + ": " + e.what());
      }
    }
    po::notify(vm);
    // --partition-from gives measured speeds; it stands for --partition measured unless another is asked for.
    if (!o.partition_from.empty() && vm["partition"].defaulted()) words.partition = "measured";
    // A draft length without speculation would be ignored: refused, so a forgotten --speculate shows.
    if (!vm["draft-max"].defaulted() && words.speculate == "off")
      throw InputError("option --draft-max: expected --speculate lookup or draft:PATH with it, found --speculate off");
  } catch (const po::error& e) {
    throw InputError(std::string("options: ") + e.what() + " (see --help)");
  }
  check(o, words);
  return o;
}

}  // namespace glacier::app
