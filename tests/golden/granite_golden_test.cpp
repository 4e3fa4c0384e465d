// IBM Granite against llama.cpp: a synthetic 3-layer granite model (llama's blocks with the embedding,
// residual, attention and logit scales of the file) written by the test, pinned by SHA-256, compared with
// llama.cpp's top-5 logits and greedy tokens on that file (tests/golden/data/granite/README.md has the
// commands); a 3-stage split must give the same bits, and a file without one of the scale keys is refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/gguf_copy.h"
#include "common/golden_models.h"
#include "common/greedy_dump_check.h"
#include "common/input_error.h"
#include "common/stage_harness.h"
#include "common/synthetic_model_file.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "model/synthetic_model.h"

namespace {

namespace model = glacier::model;
namespace gguf = glacier::gguf;
using glacier::testing::bos_ramp;

// F32 weights on both sides: float rounding of a 3-layer pass (synthetic_arch_golden_test's F32 bound). A
// scale left out moves llama.cpp's top logit by 0.1 (attention) to 5.4 (logit), far outside it.
constexpr double kF32Tolerance = 1e-4;

std::string make_model(const std::string& vocab) {
  return glacier::testing::write_scratch_model(glacier::testing::granite_golden(vocab).spec, "granite-golden");
}

TEST(GraniteGolden, TopLogitsAndGreedyTokensMatchLlamaCpp) {
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  const auto run = glacier::testing::golden_run(make_model(vocab), glacier::testing::granite_golden(vocab));
  glacier::testing::check_golden_run(run, {kF32Tolerance, kF32Tolerance}, glacier::testing::expect_golden_granite_scales);
}

TEST(GraniteGolden, ThreeStageSplitGivesTheSameLogitsBitForBit) {
  GLACIER_REQUIRE_SHARED(vocab, "models/vocab/ggml-vocab-llama-spm.gguf");
  const std::string path = make_model(vocab);
  glacier::testing::expect_split_equals_one_stage(path, {{0, 1}, {1, 2}, {2, 3}},
                                                  {bos_ramp(25, 100, 37), bos_ramp(11, 9000, -11)});
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
    glacier::testing::copy_keys(*base, w, dropped);
    glacier::testing::copy_tensors(*base, w);
    const std::string out = glacier::testing::scratch_dir("granite-golden") + "/without-key.gguf";
    w.write(out);
    const auto f = gguf::File::open(out);
    SCOPED_TRACE(std::string("without ") + dropped);
    glacier::testing::expect_input_error([&] { model::read_model_config(*f); }, {dropped, out});
  }
}

}  // namespace
