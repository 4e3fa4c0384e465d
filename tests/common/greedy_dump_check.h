// Checks an engine against a llama_greedy_dump reference (tests/golden/data/synth_quant_types/README.md
// describes the format): top-5 logits at every prompt position and greedy step, teacher-forced over
// llama.cpp's own tokens, and the free-running greedy tokens while both sides can decide them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/engine_harness.h"
#include "common/golden_models.h"

namespace glacier::testing {

struct GreedyDumpTolerances {
  double logit;          // |logit - reference| allowed before the first rounding flip
  double rounding_flip;  // ... and from the first flip on (a flip moves that position and later ones)
};

// One request a reference case (seq = the case's index), its prompt_ids fed as listed (BOS included), for
// max_new_tokens tokens, or as many as the case's generated_ids when not given.
std::vector<pipeline::SequenceRequest> reference_requests(const nlohmann::json& cases,
                                                          std::optional<int32_t> max_new_tokens = std::nullopt);

// The engine's logits teacher-forced over a reference's own tokens: prompt and all but the last of
// generated in one batch (batch invariance makes these the very logits a decode computes from that
// prefix). Rows 0..P-1 are the prompt positions, P-1+i step i.
std::vector<float> teacher_forced_logits(EngineHarness& eng, const std::vector<int32_t>& prompt,
                                         const std::vector<int32_t>& generated);

// Largest |logit - reference| over a row of n_vocab logits and the reference's row of as many.
double max_abs_deviation(const float* row, const nlohmann::json& expected_row, int32_t n_vocab);

// Runs every prompt of `cases` (the dump's JSON array) on `eng` with GoogleTest expectations; `label`
// names the model in messages. Prints one summary line a prompt.
void check_against_greedy_dump(EngineHarness& eng, const nlohmann::json& cases, const std::string& label,
                               const GreedyDumpTolerances& tol);

// A model file and the llama_greedy_dump reference llama.cpp wrote from it.
struct GoldenRun {
  std::string path;       // the model file
  std::string sha256;     // of the file the reference was made from
  std::string reference;  // the dump's JSON, relative to tests/golden/data
  std::string label;      // names the model in messages
  size_t prompts = 4;     // how many prompts the dump holds (a truncated file is caught here)
  int32_t ctx = 512;      // the engine's context
};

// A golden model (golden_models.h) written to path.
inline GoldenRun golden_run(const std::string& path, const GoldenModel& m) {
  return {path, m.sha256, m.reference, m.label};
}

// The file is the referenced one (its SHA-256), and an engine on it matches the reference
// (check_against_greedy_dump). expect_config, when given, checks the engine's config before the run.
void check_golden_run(const GoldenRun& run, const GreedyDumpTolerances& tol,
                      const std::function<void(const model::ModelConfig&)>& expect_config = nullptr);

// An expect_config for the golden granite and granitemoe files: the config carries kGoldenGraniteScales
// (the file's attention.scale as its query scale).
void expect_golden_granite_scales(const model::ModelConfig& c);

}  // namespace glacier::testing
