// Golden tests against llama.cpp for the weight types glacier_mkmodel quantizes itself (Q4_1, Q5_0, Q5_1,
// IQ4_NL, IQ4_XS): the test writes the synthetic model (pinned by SHA-256), runs it, and compares with llama.cpp's
// top-5 logits at every prompt position and greedy step on that same file (tests/golden/data/synth_quant_types).
#include <gtest/gtest.h>

#include <string>

#include "app/sha256.h"
#include "common/engine_harness.h"
#include "common/greedy_dump_check.h"
#include "common/test_env.h"
#include "model/synthetic_model.h"

using glacier::testing::EngineHarness;

namespace {

struct QuantCase {
  const char* type;    // glacier_mkmodel --type
  const char* sha256;  // of the model file the references were made from
  int32_t n_embd = 0;  // non-zero: --n-embd and --n-ff over the tiny preset (IQ4_XS needs multiples of 256)
  int32_t n_ff = 0;
};

// The SHA-256 of each glacier_mkmodel output the references were computed on (README.md beside them):
// if the generator or an encoder changes, the model is no longer the one llama.cpp saw.
const QuantCase kCases[] = {
    {"q4_1", "e6f3b2449817d346adac3d93e09e3ebb4a60bd85c3d78b402bd712780fb2af35"},
    {"q5_0", "3c2a1bee72e74b6958aa8fde9c5ce29a51edefc0480051711613a0416a8ccd30"},
    {"q5_1", "cfec42291db8116eb393d6cd6a90d5cc4c40895374c306359bb38f208c8f8c90"},
    {"iq4_nl", "df97811f9fd192cf78c4b5c2672db3984a494570869635d1e44cdcbfad9eb255"},
    {"iq4_xs", "98383686e6be75de7e03f18449295031d3a435c5f893d6849a4357a1bd60cdbd", 256, 512},
};

// The engine quantizes activations as ggml does (Q8_0, Q8_1 or Q8_K) and sums exact integer dots in ggml's
// lane order, so only float rounding is left; 1e-3 stays far below one flipped activation rounding.
constexpr double kLogitTolerance = 1e-3;
// A rounding flip (a ~1e-6 difference moving one quantized activation across a boundary) moves logits by
// up to ~0.2 at that position and later ones: held to this bound instead, as in synthetic_llama_golden_test.
constexpr double kRoundingFlipTolerance = 0.25;

std::string data_dir() { return std::string(GLACIER_SOURCE_DIR) + "/tests/golden/data/synth_quant_types"; }

class SynthQuantGolden : public ::testing::TestWithParam<QuantCase> {};

TEST_P(SynthQuantGolden, TopLogitsAndGreedyTokensMatchLlamaCpp) {
  const QuantCase& qc = GetParam();
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  const std::string model = glacier::testing::scratch_dir(std::string("synth-quant-") + qc.type) + "/model.gguf";
  glacier::model::SyntheticModelSpec spec = glacier::model::synthetic_preset("tiny");  // glacier_mkmodel's defaults
  spec.n_vocab = 0;
  spec.vocab_from = vocab;
  spec.weight_type = glacier::model::synthetic_weight_type(qc.type);
  if (qc.n_embd) {
    spec.n_embd = qc.n_embd;
    spec.n_ff = qc.n_ff;
  }
  glacier::model::write_synthetic_model(spec, model);
  ASSERT_EQ(glacier::app::sha256_file(model), qc.sha256) << qc.type << ": the synthetic model is not the referenced one";

  EngineHarness eng(model);
  const auto cases = glacier::testing::read_json(data_dir() + "/" + qc.type + ".json");
  ASSERT_EQ(cases.size(), 4u);
  glacier::testing::check_against_greedy_dump(eng, cases, std::string("synth ") + qc.type,
                                              {kLogitTolerance, kRoundingFlipTolerance});
}

INSTANTIATE_TEST_SUITE_P(GlacierQuantized, SynthQuantGolden, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.type); });

}  // namespace
