// A prefill micro-batch of several prompts gives each prompt's logits bit for bit as the prompt run alone,
// on F16 and BF16 models whose packed activations are prepared in blocks of rows by the stage's threads
// (packed_float.h): a batch past two row blocks, a last block off the tile grid, widths past one span.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/stage_harness.h"
#include "common/synthetic_model_file.h"
#include "kernels/dispatch.h"
#include "kernels/packed_float.h"
#include "model/synthetic_model.h"

namespace {

using namespace glacier;

// The tier under test for the whole case, the previous one restored after it.
class ActiveIsa {
 public:
  explicit ActiveIsa(kernels::Isa isa) : previous_(kernels::active_isa()) { kernels::set_active_isa(isa); }
  ~ActiveIsa() { kernels::set_active_isa(previous_); }

 private:
  kernels::Isa previous_;
};

std::string float_model(kernels::WeightType type, const std::string& name) {
  model::SyntheticModelSpec s = model::synthetic_preset("tiny");
  s.n_embd = 128;
  s.n_ff = 640;  // ffn_down's rows are 640 wide: one whole span of k and a part of the next
  s.n_head = 4;
  s.n_head_kv = 2;
  s.weight_type = type;
  s.seed = 31;
  return glacier::testing::synthetic_model_once(s, name);
}

void expect_batch_equals_each_prompt_alone(const std::string& path) {
  // 3 x 75 = 225 rows: two whole blocks of kFloatRowBlock and a last one of 33 rows (tiles of 5 and 6).
  static_assert(2 * kernels::kFloatRowBlock < 225 && 225 < 3 * kernels::kFloatRowBlock);
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t p = 0; p < 3; ++p) prompts.push_back(glacier::testing::bos_ramp(74, 3 + 11 * p, 1 + p));
  glacier::testing::StageHarness batch(path, {}, 512, 4, 128);
  const std::vector<float> together = batch.logits(glacier::testing::prompts_batch(prompts));
  const size_t vocab = static_cast<size_t>(batch.cfg.n_vocab);
  size_t row0 = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    glacier::testing::StageHarness single(path, {}, 512, 4, 128);
    const std::vector<float> alone = single.logits(glacier::testing::prompts_batch({prompts[p]}));
    ASSERT_EQ(alone.size(), prompts[p].size() * vocab);
    for (size_t r = 0; r < prompts[p].size(); ++r)
      ASSERT_EQ(std::memcmp(alone.data() + r * vocab, together.data() + (row0 + r) * vocab, vocab * sizeof(float)), 0)
          << "prompt " << p << " row " << r << " (batch row " << row0 + r << ")";
    row0 += prompts[p].size();
  }
}

class PrefillBatch : public ::testing::TestWithParam<kernels::WeightType> {};

TEST_P(PrefillBatch, EachPromptsLogitsAreThoseOfThePromptAlone) {
  // On the AVX2 tier the loader packs F16 and BF16 matrices (an AVX-512 machine runs the case there too).
  const kernels::Isa isa = kernels::cpu_supports(kernels::Isa::Avx2) ? kernels::Isa::Avx2 : kernels::active_isa();
  const ActiveIsa tier(isa);
  if (!kernels::packs_float_weights(isa))
    GTEST_SKIP() << "no tier of this CPU packs float weights (the AVX2 tiers do)";
  const kernels::WeightType type = GetParam();
  expect_batch_equals_each_prompt_alone(float_model(type, std::string("prefill_batch_") + std::string(kernels::weight_type_name(type))));
}

INSTANTIATE_TEST_SUITE_P(FloatTypes, PrefillBatch, ::testing::Values(kernels::WeightType::F16, kernels::WeightType::BF16),
                         [](const auto& info) { return std::string(kernels::weight_type_name(info.param)); });

}  // namespace
