// Golden tests against llama.cpp for the weight types glacier_mkmodel quantizes itself (Q4_1, Q5_0, Q5_1,
// IQ4_NL, IQ4_XS, Q2_K, Q3_K and the K-quant mixes Q3_K_M, Q4_K_M, Q5_K_M): the test writes the synthetic model (pinned by SHA-256), runs it, and compares with llama.cpp's
// top-5 logits at every prompt position and greedy step on that same file (tests/golden/data/synth_quant_types).
#include <gtest/gtest.h>

#include <string>

#include "app/sha256.h"
#include "common/engine_harness.h"
#include "common/golden_models.h"
#include "common/greedy_dump_check.h"
#include "common/test_env.h"
#include "model/synthetic_model.h"

using glacier::testing::EngineHarness;

namespace {

using glacier::testing::QuantCase;

// The engine quantizes activations as ggml does (Q8_0, Q8_1 or Q8_K) and sums exact integer dots (in ggml's
// lane order, but for Q4_K..Q6_K's one integer a super-block), so only float rounding is left; 1e-3 stays
// far below one flipped activation rounding.
constexpr double kLogitTolerance = 1e-3;
// A rounding flip (a ~1e-6 difference moving one quantized activation across a boundary) moves logits by
// up to ~0.2 at that position and later ones: held to this bound instead, as in synthetic_llama_golden_test.
constexpr double kRoundingFlipTolerance = 0.25;

class SynthQuantGolden : public ::testing::TestWithParam<QuantCase> {};

TEST_P(SynthQuantGolden, TopLogitsAndGreedyTokensMatchLlamaCpp) {
  const QuantCase& qc = GetParam();
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  const std::string model = glacier::testing::scratch_dir(std::string("synth-quant-") + qc.type) + "/model.gguf";
  const glacier::testing::GoldenModel golden = glacier::testing::synth_quant_golden(vocab, qc);
  glacier::model::write_synthetic_model(golden.spec, model);
  ASSERT_EQ(glacier::app::sha256_file(model), golden.sha256) << qc.type << ": the synthetic model is not the referenced one";

  EngineHarness eng(model);
  const auto cases = glacier::testing::read_json(glacier::testing::golden_data_dir() + "/" + golden.reference);
  ASSERT_EQ(cases.size(), 4u);
  glacier::testing::check_against_greedy_dump(eng, cases, std::string("synth ") + qc.type,
                                              {kLogitTolerance, kRoundingFlipTolerance});
}

INSTANTIATE_TEST_SUITE_P(GlacierQuantized, SynthQuantGolden, ::testing::ValuesIn(glacier::testing::synth_quant_cases()),
                         [](const auto& info) { return std::string(info.param.type); });

}  // namespace
