// IBM Granite MoE against llama.cpp: the shared synthetic Mixtral model (3 layers, 4 experts, top 2)
// rewritten as a granitemoe file (its llama.* keys renamed, the four Granite scales added), pinned by
// SHA-256 and compared with llama.cpp's top-5 logits and greedy tokens on that file
// (tests/golden/data/granite/README.md has the commands); a 3-stage split must give the same bits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/gguf_copy.h"
#include "common/golden_models.h"
#include "common/greedy_dump_check.h"
#include "common/stage_harness.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"

namespace {

namespace gguf = glacier::gguf;
using glacier::testing::bos_ramp;

constexpr const char* kModelSha256 = "0cc5e68774e7c26702f4709123431aac54d7fa1ea534dde9c12d589db4f09620";

// F32 weights on both sides: float rounding of a 3-layer pass with expert routing (the f32 bound of
// synthetic_arch_golden_test, where the same Mixtral file runs as llama).
constexpr double kF32Tolerance = 1e-4;

// The Mixtral file as granitemoe: same tensors, llama.* keys under granitemoe.*, and the scales.
std::string write_granitemoe(const std::string& mixtral) {
  const auto base = gguf::File::open(mixtral);
  gguf::Writer w;
  for (const auto& [key, value] : base->metadata()) {
    if (key == "general.architecture") {
      w.set_string(key, "granitemoe");
    } else if (key.rfind("llama.", 0) == 0) {
      w.set("granitemoe." + key.substr(6), value);
    } else {
      w.set(key, value);
    }
  }
  const auto& scales = glacier::testing::kGoldenGraniteScales;
  w.set_f32("granitemoe.embedding_scale", scales.embedding_scale);
  w.set_f32("granitemoe.residual_scale", scales.residual_scale);
  w.set_f32("granitemoe.attention.scale", scales.attention_scale);
  w.set_f32("granitemoe.logit_scale", scales.logit_scale);
  glacier::testing::copy_tensors(*base, w);
  const std::string path = glacier::testing::scratch_dir("granitemoe-golden") + "/granitemoe.gguf";
  w.write(path);
  return path;
}

TEST(GraniteMoeGolden, TopLogitsAndGreedyTokensMatchLlamaCpp) {
  GLACIER_REQUIRE_SHARED(mixtral, "models/synthetic/synth-mixtral-f32.gguf");
  const std::string path = write_granitemoe(mixtral);
  const glacier::testing::GoldenRun run{path, kModelSha256, "granite/granitemoe.json", "synth granitemoe"};
  glacier::testing::check_golden_run(run, {kF32Tolerance, kF32Tolerance}, [](const glacier::model::ModelConfig& c) {
    EXPECT_EQ(c.n_expert, 4);
    EXPECT_EQ(c.n_expert_used, 2);
    glacier::testing::expect_golden_granite_scales(c);
  });
}

TEST(GraniteMoeGolden, ThreeStageSplitGivesTheSameLogitsBitForBit) {
  GLACIER_REQUIRE_SHARED(mixtral, "models/synthetic/synth-mixtral-f32.gguf");
  const std::string path = write_granitemoe(mixtral);
  glacier::testing::expect_split_equals_one_stage(path, {{0, 1}, {1, 2}, {2, 3}},
                                                  {bos_ramp(25, 100, 13), bos_ramp(11, 500, -11)});
}

}  // namespace
