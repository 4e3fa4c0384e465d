// IBM Granite against llama.cpp: a synthetic 3-layer granite model (llama's blocks with the embedding,
// residual, attention and logit scales of the file) written by the test, pinned by SHA-256, compared with
// llama.cpp's top-5 logits and greedy tokens on that file (tests/golden/data/granite/README.md has the
// commands); a 3-stage split must give the same bits, and a file without one of the scale keys is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "app/sha256.h"
#include "common/engine_harness.h"
#include "common/golden_models.h"
#include "common/greedy_dump_check.h"
#include "common/stage_harness.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "model/synthetic_model.h"
#include "util/error.h"

namespace {

using glacier::testing::EngineHarness;
namespace model = glacier::model;
namespace gguf = glacier::gguf;

// F32 weights on both sides: float rounding of a 3-layer pass (synthetic_arch_golden_test's F32 bound). A
// scale left out moves llama.cpp's top logit by 0.1 (attention) to 5.4 (logit), far outside it.
constexpr double kF32Tolerance = 1e-4;

std::string make_model(const std::string& vocab) {
  const std::string path = glacier::testing::scratch_dir("granite-golden") + "/model.gguf";
  model::write_synthetic_model(glacier::testing::granite_golden(vocab).spec, path);
  return path;
}

TEST(GraniteGolden, TopLogitsAndGreedyTokensMatchLlamaCpp) {
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  const std::string path = make_model(vocab);
  ASSERT_EQ(glacier::app::sha256_file(path), glacier::testing::granite_golden(vocab).sha256) << "the synthetic model is not the referenced one";
  EngineHarness eng(path);
  EXPECT_EQ(eng.cfg.embedding_scale, 4.0f);
  EXPECT_EQ(eng.cfg.residual_scale, 0.5f);
  EXPECT_EQ(eng.cfg.query_scale, 0.2f);
  EXPECT_EQ(eng.cfg.logit_scale, 0.5f);
  const auto cases =
      glacier::testing::read_json(std::string(GLACIER_SOURCE_DIR) + "/tests/golden/data/granite/granite.json");
  ASSERT_EQ(cases.size(), 4u);
  glacier::testing::check_against_greedy_dump(eng, cases, "synth granite", {kF32Tolerance, kF32Tolerance});
}

TEST(GraniteGolden, ThreeStageSplitGivesTheSameLogitsBitForBit) {
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  const std::string path = make_model(vocab);
  std::vector<std::vector<int32_t>> prompts = {{1}, {1}};
  for (int32_t i = 0; i < 25; ++i) prompts[0].push_back(100 + 37 * i);
  for (int32_t i = 0; i < 11; ++i) prompts[1].push_back(9000 - 11 * i);
  glacier::testing::expect_split_equals_one_stage(path, {{0, 1}, {1, 2}, {2, 3}}, prompts);
}

// llama.cpp requires all four keys; a file without one would be computed differently there, so it is refused
// naming the key.
TEST(GraniteGolden, AFileWithoutAScaleKeyIsRefused) {
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  const std::string path = make_model(vocab);
  auto base = gguf::File::open(path);
  for (const char* dropped : {"granite.embedding_scale", "granite.residual_scale", "granite.attention.scale",
                              "granite.logit_scale"}) {
    gguf::Writer w;
    for (const auto& [key, value] : base->metadata())
      if (key != dropped) w.set(key, value);
    for (const gguf::TensorInfo& t : base->tensors())
      w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                   std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    const std::string out = glacier::testing::scratch_dir("granite-golden") + "/without-key.gguf";
    w.write(out);
    const auto f = gguf::File::open(out);
    try {
      model::read_model_config(*f);
      ADD_FAILURE() << "a granite file without " << dropped << " was accepted";
    } catch (const glacier::InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(dropped), std::string::npos) << msg;
      EXPECT_NE(msg.find(out), std::string::npos) << msg;
    }
  }
}

}  // namespace
