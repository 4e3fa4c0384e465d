// Provenance records: the settings that decide results, every option as JSON, time stamps, the batch
// job's ids and the command line.
#include "app/provenance.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>

#include "app/model_digest.h"
#include "app/prompt_sampling.h"
#include "comm/startup_watchdog.h"
#include "app/sha256.h"
#include "util/log.h"
#include "version/build_info.h"
#include "gguf/tensor_type.h"
#include "kernels/dispatch.h"
#include "model/chat_template.h"
#include "planning/partition.h"

namespace glacier::app {
namespace {

nlohmann::json text_or_null(const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); }

// {"13": -100.0, ...}, as a prompt line writes it.
nlohmann::json logit_bias_text(const std::vector<std::pair<int32_t, float>>& bias) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [id, b] : bias) j[std::to_string(id)] = b;
  return j;
}

}  // namespace

std::string tensor_type_summary(const gguf::File& f) {
  std::map<std::string, int> counts;
  for (const auto& t : f.tensors()) counts[gguf::type_name(t.type)]++;
  std::string s;
  for (const auto& [name, n] : counts) {
    if (!s.empty()) s += ',';
    s += name + ':' + std::to_string(n);
  }
  return s;
}

Provenance describe_run(const JobOptions& o, const gguf::File& model, const RunFacts& facts) {
  Provenance p;
  p.model_path = o.model;
  p.model_bytes = model.file_size();
  p.model_sha256 = facts.model_sha256;
  p.tensor_types = tensor_type_summary(model);
  p.layer_split = facts.layer_split;
  p.ranks = facts.ranks;
  for (const std::string& h : facts.hosts) p.hosts += (p.hosts.empty() ? "" : ",") + h;
  p.options = options_json(o).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::optional<std::string> chat;
  if (facts.chat.chat_template) chat = model::chat_template_name(*facts.chat.chat_template);
  p.settings = result_settings(o, facts.n_ctx, chat, facts.layer_split).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  p.version = build_version();
  p.commit = build_commit();
  p.mode = option_word(o.mode);
  p.command_line = shell_command_line(o.command_line);
  p.started_at = facts.started_at;
  p.prompts_sha256 = sha256_file(o.prompts);
  p.batch_job = batch_job_json().dump();
  p.kernels = kernels::isa_name(kernels::active_isa());
  p.decode_groups = facts.decode_groups;
  return p;
}

std::string model_sha256_reporting(const std::string& model_path) {
  const FileDigest digest = cached_sha256_file(model_path, model_digest_cache_path(), [](uint64_t done, uint64_t total) {
    char detail[96];
    std::snprintf(detail, sizeof detail, "%.0f of %.0f MiB hashed", done / 1048576.0, total / 1048576.0);
    comm::startup::progress(detail);
  });
  GLACIER_LOG_DEBUG("model SHA-256 %s (%s)", digest.sha256.c_str(),
                    digest.from_cache ? "cached, the file unchanged since it was hashed" : "computed");
  return digest.sha256;
}

nlohmann::json result_settings(const JobOptions& o, int32_t n_ctx, const std::optional<std::string>& chat_template,
                               const std::string& layer_split) {
  nlohmann::json j = sampling_settings_json(o);
  // Here the bias stays the [id, bias] pairs that result files have always held, which --resume compares.
  j["logit_bias"] = o.logit_bias;
  j["mode"] = option_word(o.mode);
  j["ctx"] = n_ctx;
  j["no_bos"] = o.no_bos;
  j["chat_template"] = chat_template ? nlohmann::json(*chat_template) : nlohmann::json();
  j["wire"] = option_word(o.wire);
  if (o.wire != pipeline::WireCodec::F32) j["layer_split"] = layer_split;
  return j;
}

std::optional<std::string> setting_differences(const nlohmann::json& then, const nlohmann::json& now) {
  auto show = [](const nlohmann::json& j, const std::string& key) {
    return j.contains(key) ? j[key].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) : std::string("(absent)");
  };
  std::string differences;
  auto add = [&](const std::string& key) {
    differences += (differences.empty() ? "" : "; ") + key + ": " + show(then, key) + " in the file, " + show(now, key) + " now";
  };
  for (const auto& [key, value] : now.items())
    if (!then.contains(key) || then[key] != value) add(key);
  for (const auto& [key, value] : then.items())
    if (!now.contains(key)) add(key);
  if (differences.empty()) return std::nullopt;
  return differences;
}

nlohmann::json options_json(const JobOptions& o) {
  return {{"model", o.model},
          {"prompts", o.prompts},
          {"jsonl", text_or_null(o.jsonl_out)},
          {"out", text_or_null(o.h5_out)},
          {"mode", option_word(o.mode)},
          {"resume", o.resume},
          {"config", text_or_null(o.config_file)},
          {"max-tokens", o.max_tokens},
          {"temperature", o.temperature},
          {"top-k", o.top_k},
          {"top-p", o.top_p},
          {"min-p", o.min_p},
          {"seed", o.seed},
          {"stop", o.stop},
          {"include-stop-str-in-output", o.include_stop_str_in_output},
          {"stop-token-ids", o.stop_token_ids},
          {"ignore-eos", o.ignore_eos},
          {"min-tokens", o.min_tokens},
          {"n", o.n},
          {"n-prefill", n_prefill_word(o.share_prefill)},
          {"prefix-sharing", prefix_sharing_word(o.prefix_sharing)},
          {"speculate", speculate_word(o)},
          {"draft-max", o.draft_max},
          {"repetition-penalty", o.repetition_penalty},
          {"presence-penalty", o.presence_penalty},
          {"frequency-penalty", o.frequency_penalty},
          {"logit-bias", logit_bias_text(o.logit_bias)},
          {"top-logprobs", o.top_logprobs},
          {"no-bos", o.no_bos},
          {"chat-template", o.chat_template ? nlohmann::json(model::chat_template_name(*o.chat_template)) : nlohmann::json()},
          {"ctx", o.ctx},
          {"slots", o.slots},
          {"ubatch", o.ubatch},
          {"decode-groups", o.decode_groups == kDecodeGroupsAuto ? nlohmann::json("auto") : nlohmann::json(o.decode_groups)},
          {"threads", o.threads},
          {"oversubscribe-threads", o.oversubscribe_threads},
          {"bind", option_word(o.bind)},
          {"replicas", o.replicas == 0 ? nlohmann::json("auto") : nlohmann::json(o.replicas)},
          {"expert-parallel", o.expert_parallel},
          {"layers", text_or_null(planning::format_layer_split(o.layers))},
          {"partition", option_word(o.partition)},
          {"partition-from", text_or_null(o.partition_from)},
          {"slow-rank", o.slow_rank < 0 ? nlohmann::json() : nlohmann::json(std::to_string(o.slow_rank) + ":" + std::to_string(o.slow_factor))},
          {"wire", option_word(o.wire)},
          {"flush-every", o.flush_every},
          {"flush-seconds", o.flush_seconds},
          {"max-memory-gib", o.max_memory_gib},
          {"stall-timeout", o.stall_timeout},
          {"inject-latency-ms", o.inject_latency_ms},
          {"log-level", option_word(o.log_level)}};
}

std::string utc_timestamp() {
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

nlohmann::json batch_job_json() {
  static const std::pair<const char*, const char*> kSlurm[] = {
      {"job_id", "SLURM_JOB_ID"},         {"array_job_id", "SLURM_ARRAY_JOB_ID"}, {"array_task_id", "SLURM_ARRAY_TASK_ID"},
      {"cluster", "SLURM_CLUSTER_NAME"}, {"nodelist", "SLURM_JOB_NODELIST"},     {"restart_count", "SLURM_RESTART_COUNT"}};
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, variable] : kSlurm)
    if (const char* value = std::getenv(variable); value && *value) j[key] = value;
  if (!j.empty()) j["system"] = "slurm";
  return j;
}

std::string shell_command_line(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& word : argv) {
    if (!line.empty()) line += ' ';
    const bool plain = !word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                               "0123456789-_./=:,+@%") == std::string::npos;
    if (plain) {
      line += word;
      continue;
    }
    line += '\'';
    for (char c : word) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += '\'';
  }
  return line;
}

}  // namespace glacier::app
