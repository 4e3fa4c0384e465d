// What produced a results file (model, inputs, options, engine, hosts, batch job, times) and the
// settings that decide its answers, which --resume must find unchanged.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/options.h"
#include "app/requests.h"
#include "gguf/gguf_file.h"

namespace glacier::app {

// Stored as root attributes of the HDF5 results file (names as the fields; JSON text where noted).
struct Provenance {
  std::string model_path;
  uint64_t model_bytes = 0;
  std::string model_sha256;
  std::string tensor_types;  // "f32:11,q8_0:32"
  std::string layer_split;   // "0:3,3:5"
  int32_t ranks = 1;
  std::string hosts;         // one per rank, comma-separated
  std::string options;       // JSON: every option as this run had it (options_json)
  std::string settings;      // JSON: what changes results (result_settings), compared on --resume
  std::string version;
  std::string commit;
  std::string mode;
  std::string command_line;  // argv, shell-quoted
  std::string started_at;    // UTC, ISO 8601
  std::string prompts_sha256;
  std::string batch_job;     // JSON: the batch system's job ids (Slurm), {} outside one
  std::string kernels;       // the kernel variant rank 0 ran (GLACIER_KERNELS or the best supported)
  std::string decode_groups; // JSON: the decode groups and, under auto, what chose them (planning/decode_group_plan.h)
};

// What the job learned while setting up that the record needs.
struct RunFacts {
  std::string layer_split;
  int32_t ranks = 1;
  std::vector<std::string> hosts;
  int32_t n_ctx = 0;
  ChatSetup chat;
  std::string started_at;
  std::string model_sha256;  // hashed during start-up (model_sha256_reporting)
  std::string decode_groups; // JSON (planning::DecodeGroupPlan::to_json), replica 0's
};

// The model's SHA-256 (cached per file), reporting the bytes hashed to the start-up watchdog: on a
// first run a model of hundreds of GB takes minutes to hash.
std::string model_sha256_reporting(const std::string& model_path);

// The whole record for a generate or score job: hashes the prompt file. Throws InputError naming a
// file that cannot be read.
Provenance describe_run(const JobOptions& o, const gguf::File& model, const RunFacts& facts);

// "f32:11,q8_0:32": how many tensors of each type the model holds.
std::string tensor_type_summary(const gguf::File& f);

// The file-wide settings a row's answer depends on besides its prompt line: the mode, the sampling
// defaults, context, BOS, the chat template in effect, the wire codec and, for a lossy codec, where
// the stages cut the layers (each cut quantizes the activations once more). Ranks, replicas, threads,
// micro-batch size and the split under --wire f32 are left out: results are bitwise the same for any.
nlohmann::json result_settings(const JobOptions& o, int32_t n_ctx, const std::optional<std::string>& chat_template,
                               const std::string& layer_split);

// Names every setting that differs between a results file's settings and this run's (nullopt when
// they agree), e.g. `wire: "f32" in the file, "int8" now`.
std::optional<std::string> setting_differences(const nlohmann::json& then, const nlohmann::json& now);

// Every option of the job as a JSON object keyed by the option's long name (as on the command line).
nlohmann::json options_json(const JobOptions& o);

// The current time in UTC as ISO 8601 with seconds ("2026-12-03T15:42:57Z").
std::string utc_timestamp();

// SLURM_JOB_ID, SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID, SLURM_CLUSTER_NAME, SLURM_JOB_NODELIST and
// SLURM_RESTART_COUNT where set, as {"job_id": ..., ...}; {} outside a batch job.
nlohmann::json batch_job_json();

// argv joined with spaces, each word single-quoted when the shell would otherwise split or expand it.
std::string shell_command_line(const std::vector<std::string>& argv);

}  // namespace glacier::app
