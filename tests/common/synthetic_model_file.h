// Test helpers: a synthetic model written once per test process (write_synthetic_model into a scratch
// directory), so the tests of one binary share the file instead of writing it again each; or written
// afresh into a scratch directory of its own.
#pragma once
#include <cstdint>
#include <string>

#include "model/synthetic_model.h"

namespace glacier::testing {

// The path of <scratch_name>/model.gguf, written from spec the first time this process asks for
// scratch_name; later calls with that name return the same file (a name stands for one spec).
std::string synthetic_model_once(const model::SyntheticModelSpec& spec, const std::string& scratch_name);

// synthetic_model_once of the tiny preset with n_layer layers of Q8_0 weights drawn from `seed`: the model
// the tests of the whole ring in threads split over stages.
std::string tiny_q8_0_model_once(int32_t n_layer, uint64_t seed, const std::string& scratch_name);

// spec written as <scratch_name>/<file_name> in a fresh scratch directory (each call writes anew); the
// file's path.
std::string write_scratch_model(const model::SyntheticModelSpec& spec, const std::string& scratch_name,
                                const std::string& file_name = "model.gguf");

}  // namespace glacier::testing
