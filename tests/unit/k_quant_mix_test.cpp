// K-quant mixes: per-tensor types of an 8-layer llama model written out by hand from llama.cpp's
// llama_tensor_get_type (c392e509) for each mix, its overrides for 8 experts, the file_type codes, and a
// written mix file carrying those types and loading and running with finite logits.
#include "model/k_quant_mix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "common/engine_harness.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "model/synthetic_model.h"
#include "util/error.h"

namespace glacier::model {
namespace {

using kernels::WeightType;

constexpr int kLayers = 8;
const MixModelShape kShape{kLayers, 4, 2};

// Per layer (0..7) the type of attn_v, ffn_down and attn_output; every other 2-D tensor of a layer and
// token_embd get `base`, output.weight Q6_K. With 8 layers use_more_bits picks layers 0 (i < n/8), 7
// (i >= 7n/8), 3 and 6 ((i - 1) % 3 == 2); n/16 = 0 picks none.
struct Expected {
  const char* mix;
  uint32_t file_type;
  WeightType base;
  std::string attn_v, ffn_down, attn_output;  // one letter a layer: 3..6 = Q3_K..Q6_K
};

WeightType k_type(char c) {
  switch (c) {
    case '3': return WeightType::Q3_K;
    case '4': return WeightType::Q4_K;
    case '5': return WeightType::Q5_K;
    default: return WeightType::Q6_K;
  }
}

const Expected kExpected[] = {
    {"q3_k_s", 11, WeightType::Q3_K, "33333333", "33333333", "33333333"},
    {"q3_k_m", 12, WeightType::Q3_K, "55444444", "44444444", "44444444"},  // attn_v i < 2; ffn_down i < n/16
    {"q3_k_l", 13, WeightType::Q3_K, "55555555", "55555555", "55555555"},
    {"q4_k_s", 14, WeightType::Q4_K, "55554444", "54444444", "44444444"},  // attn_v i < 4; ffn_down i < n/8
    {"q4_k_m", 15, WeightType::Q4_K, "64464466", "64464466", "44444444"},
    {"q5_k_s", 16, WeightType::Q5_K, "55555555", "55555555", "55555555"},
    {"q5_k_m", 17, WeightType::Q5_K, "65565566", "65565566", "55555555"},
};

TEST(KQuantMix, AssignsLlamaQuantizesTypesPerTensor) {
  for (const Expected& e : kExpected) {
    const auto mix = k_quant_mix_named(e.mix);
    ASSERT_TRUE(mix.has_value()) << e.mix;
    EXPECT_STREQ(k_quant_mix_name(*mix), e.mix);
    EXPECT_EQ(k_quant_mix_file_type(*mix), e.file_type) << e.mix;
    EXPECT_EQ(k_quant_mix_base(*mix), e.base) << e.mix;
    EXPECT_EQ(k_quant_mix_type(*mix, "output.weight", kShape), WeightType::Q6_K) << e.mix;
    EXPECT_EQ(k_quant_mix_type(*mix, "token_embd.weight", kShape), e.base) << e.mix;
    for (int l = 0; l < kLayers; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      EXPECT_EQ(k_quant_mix_type(*mix, b + "attn_v.weight", kShape), k_type(e.attn_v[size_t(l)])) << e.mix << " " << l;
      EXPECT_EQ(k_quant_mix_type(*mix, b + "ffn_down.weight", kShape), k_type(e.ffn_down[size_t(l)])) << e.mix << " " << l;
      EXPECT_EQ(k_quant_mix_type(*mix, b + "attn_output.weight", kShape), k_type(e.attn_output[size_t(l)])) << e.mix << " " << l;
      for (const char* other : {"attn_q.weight", "attn_k.weight", "ffn_gate.weight", "ffn_up.weight"})
        EXPECT_EQ(k_quant_mix_type(*mix, b + other, kShape), e.base) << e.mix << " " << b << other;
    }
  }
  EXPECT_FALSE(k_quant_mix_named("q2_k_s").has_value());
  EXPECT_FALSE(k_quant_mix_named("q4_k").has_value());  // a single type, not a mix
}

// llama.cpp's LLM_TYPE_70B (80 layers, grouped K/V): attn_v Q3_K/Q4_K become Q5_K.
TEST(KQuantMix, SeventyBShapeBumpsAttnV) {
  const MixModelShape shape{80, 64, 8};
  EXPECT_EQ(k_quant_mix_type(KQuantMix::Q4_K_M, "blk.11.attn_v.weight", shape), WeightType::Q5_K);  // not more bits
  EXPECT_EQ(k_quant_mix_type(KQuantMix::Q4_K_M, "blk.0.attn_v.weight", shape), WeightType::Q6_K);  // more bits
  EXPECT_EQ(k_quant_mix_type(KQuantMix::Q3_K_S, "blk.40.attn_v.weight", shape), WeightType::Q5_K);
  EXPECT_EQ(k_quant_mix_type(KQuantMix::Q3_K_S, "blk.40.attn_v.weight", MixModelShape{80, 64, 64}), WeightType::Q3_K);
}

// llama_tensor_get_type with exactly 8 experts: attn_k and attn_v Q8_0, attn_output Q5_K for Q3_K_S, Q3_K_M,
// Q4_K_S and Q4_K_M (the base type for the others), ffn_down (stacked experts too) by layer as without experts;
// no 70B bump (llama with 8 experts is "8x7B"/"8x22B"), and none for qwen3moe whatever its experts.
TEST(KQuantMix, EightExpertsOverrideAttentionTypes) {
  const MixModelShape eight{kLayers, 4, 2, 8, "qwen3moe"};
  const MixModelShape four{kLayers, 4, 2, 4, "qwen3moe"};
  for (const Expected& e : kExpected) {
    const KQuantMix mix = *k_quant_mix_named(e.mix);
    const bool q5_k_output = mix == KQuantMix::Q3_K_S || mix == KQuantMix::Q3_K_M || mix == KQuantMix::Q4_K_S ||
                             mix == KQuantMix::Q4_K_M;
    for (int l = 0; l < kLayers; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      EXPECT_EQ(k_quant_mix_type(mix, b + "attn_k.weight", eight), WeightType::Q8_0) << e.mix << " " << l;
      EXPECT_EQ(k_quant_mix_type(mix, b + "attn_v.weight", eight), WeightType::Q8_0) << e.mix << " " << l;
      EXPECT_EQ(k_quant_mix_type(mix, b + "attn_output.weight", eight), q5_k_output ? WeightType::Q5_K : e.base) << e.mix << " " << l;
      EXPECT_EQ(k_quant_mix_type(mix, b + "ffn_down_exps.weight", eight), k_type(e.ffn_down[size_t(l)])) << e.mix << " " << l;
      for (const char* other : {"attn_q.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight"})
        EXPECT_EQ(k_quant_mix_type(mix, b + other, eight), e.base) << e.mix << " " << b << other;
      // Any other expert count: the rules without experts.
      EXPECT_EQ(k_quant_mix_type(mix, b + "attn_v.weight", four), k_type(e.attn_v[size_t(l)])) << e.mix << " " << l;
      EXPECT_EQ(k_quant_mix_type(mix, b + "attn_k.weight", four), e.base) << e.mix << " " << l;
      EXPECT_EQ(k_quant_mix_type(mix, b + "attn_output.weight", four), k_type(e.attn_output[size_t(l)])) << e.mix << " " << l;
    }
  }
  EXPECT_EQ(k_quant_mix_type(KQuantMix::Q3_K_S, "blk.40.attn_v.weight", MixModelShape{80, 64, 8, 8, "llama"}), WeightType::Q8_0);
  EXPECT_EQ(k_quant_mix_type(KQuantMix::Q3_K_S, "blk.40.attn_v.weight", MixModelShape{80, 64, 8, 0, "qwen3moe"}), WeightType::Q3_K);
  EXPECT_EQ(k_quant_mix_type(KQuantMix::Q3_K_S, "blk.40.attn_v.weight", MixModelShape{80, 64, 8, 0, "granite"}), WeightType::Q3_K);
}

TEST(KQuantMix, WrittenMixFileCarriesTheTypesAndRuns) {
  const std::string dir = testing::scratch_dir("k_quant_mix_file");
  SyntheticModelSpec s = synthetic_preset("tiny");
  s.n_embd = 256;
  s.n_ff = 512;
  s.n_layer = kLayers;
  s.threads = 1;
  set_synthetic_type(s, "q4_k_m");
  const std::string path = dir + "/m.gguf";
  write_synthetic_model(s, path);
  const auto f = gguf::File::open(path);
  EXPECT_EQ(f->get_uint("general.file_type"), 15u);
  EXPECT_EQ(f->get_uint("general.quantization_version"), 2u);
  const std::map<WeightType, gguf::TensorType> gguf_of = {{WeightType::Q4_K, gguf::TensorType::Q4_K},
                                                          {WeightType::Q6_K, gguf::TensorType::Q6_K}};
  EXPECT_EQ(f->find_tensor("output.weight")->type, gguf::TensorType::Q6_K);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->type, gguf::TensorType::Q4_K);
  for (int l = 0; l < kLayers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(f->find_tensor(b + "attn_v.weight")->type, gguf_of.at(k_type(kExpected[4].attn_v[size_t(l)]))) << l;
    EXPECT_EQ(f->find_tensor(b + "ffn_down.weight")->type, gguf_of.at(k_type(kExpected[4].ffn_down[size_t(l)]))) << l;
    EXPECT_EQ(f->find_tensor(b + "attn_q.weight")->type, gguf::TensorType::Q4_K) << l;
    EXPECT_EQ(f->find_tensor(b + "attn_norm.weight")->type, gguf::TensorType::F32) << l;
  }
  testing::EngineHarness h(path, 128, 2, 64, 1);
  const std::vector<float> logits = h.all_logits(h.tok->encode("Once upon a time", true, false));
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

TEST(KQuantMix, MixNeedsSuperBlockWidths) {
  SyntheticModelSpec s = synthetic_preset("tiny");  // 64 wide
  set_synthetic_type(s, "q3_k_m");
  try {
    write_synthetic_model(s, testing::scratch_dir("k_quant_mix_narrow") + "/m.gguf");
    FAIL() << "a 64-wide q3_k_m model was written";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--n-embd: expected a multiple of 256 (the block size of --type q3_k_m), found 64"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace glacier::model
