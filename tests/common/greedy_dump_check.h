// Checks an engine against a llama_greedy_dump reference (tests/golden/data/synth_quant_types/README.md
// describes the format): top-5 logits at every prompt position and greedy step, teacher-forced over
// llama.cpp's own tokens, and the free-running greedy tokens while both sides can decide them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "common/engine_harness.h"

namespace glacier::testing {

struct GreedyDumpTolerances {
  double logit;          // |logit - reference| allowed before the first rounding flip
  double rounding_flip;  // ... and from the first flip on (a flip moves that position and later ones)
};

// Runs every prompt of `cases` (the dump's JSON array) on `eng` with GoogleTest expectations; `label`
// names the model in messages. Prints one summary line a prompt.
void check_against_greedy_dump(EngineHarness& eng, const nlohmann::json& cases, const std::string& label,
                               const GreedyDumpTolerances& tol);

}  // namespace glacier::testing
