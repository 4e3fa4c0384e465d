// Synthetic models: same spec -> same bytes (whatever the thread count or chunking), the model loads
// and runs through the engine with finite logits for every weight type, weight statistics follow the
// stated rule, the built-in vocabulary tokenizes English into words, --vocab-from copies exactly; qwen3moe files
// have the shared synth-qwen3moe layout (keys, tensor names, shapes, llama-quantize's types) and run.
#include "model/synthetic_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "common/engine_harness.h"
#include "common/gguf_value_equal.h"
#include "common/input_error.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "kernels/dequantize.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/synthetic_vocab.h"
#include "model/tokenizer.h"
#include "util/error.h"

namespace glacier::model {
namespace {

using kernels::WeightType;

// Sample statistics of N independent draws: the mean's standard error is sigma/sqrt(N) and the
// standard deviation's relative standard error about 1/sqrt(2N); 6 standard errors never fail by chance.
constexpr double kStandardErrors = 6.0;
// Q8_0 reconstruction error: half a step plus 127 steps times the fp16 scale's 2^-11 rounding.
constexpr double kQ8ErrorInSteps = 0.5 + 127.0 / 2048.0;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

SyntheticModelSpec tiny(WeightType t = WeightType::F32, uint64_t seed = 1) {
  SyntheticModelSpec s = synthetic_preset("tiny");
  s.weight_type = t;
  s.seed = seed;
  s.threads = 1;
  return s;
}

std::string write(const SyntheticModelSpec& s, const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  write_synthetic_model(s, path);
  return path;
}

using testing::refusal_message;

struct Moments {
  double mean = 0, std = 0;
  size_t n = 0;
};
Moments moments(const std::vector<float>& v) {
  Moments m;
  m.n = v.size();
  for (float x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (float x : v) m.std += (x - m.mean) * (x - m.mean);
  m.std = std::sqrt(m.std / static_cast<double>(v.size()));
  return m;
}

std::vector<float> f32_tensor(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return {};
  EXPECT_EQ(t->type, gguf::TensorType::F32) << name;
  std::vector<float> v(static_cast<size_t>(t->n_elements()));
  std::memcpy(v.data(), t->data, v.size() * sizeof(float));
  return v;
}

void expect_moments(const std::vector<float>& v, double mean, double std, const std::string& what) {
  const Moments m = moments(v);
  const double n = static_cast<double>(m.n);
  EXPECT_NEAR(m.mean, mean, kStandardErrors * std / std::sqrt(n)) << what;
  EXPECT_NEAR(m.std, std, kStandardErrors * std / std::sqrt(2.0 * n)) << what;
}

// The model at `path` runs: finite logits at every prompt position, spread out (random weights still give a
// spread; a zero or constant head would not), and 8 greedy tokens inside the vocabulary.
void expect_forward_pass_runs(const std::string& path, int32_t n_vocab) {
  testing::EngineHarness h(path, 128, 2, 64, 1);
  const std::vector<int32_t> prompt = h.tok->encode("Once upon a time, there was a little girl", true, false);
  const std::vector<float> logits = h.all_logits(prompt);
  ASSERT_EQ(logits.size(), prompt.size() * static_cast<size_t>(n_vocab));
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  const std::vector<float> last(logits.end() - n_vocab, logits.end());
  EXPECT_GT(moments(last).std, 0.1);
  const auto gen = h.greedy({"The dog saw a big red ball"}, 8);
  ASSERT_EQ(gen.size(), 1u);
  EXPECT_EQ(gen[0].size(), 8u);
  for (int32_t id : gen[0]) EXPECT_TRUE(id >= 0 && id < n_vocab) << id;
}

TEST(SyntheticModel, SameSpecGivesSameBytesWhateverTheThreadCount) {
  const std::string dir = testing::scratch_dir("synthetic_same_bytes");
  SyntheticModelSpec one = tiny(WeightType::Q8_0, 7);
  SyntheticModelSpec two = one;
  two.threads = 2;
  const std::vector<uint8_t> a = read_bytes(write(one, dir, "a.gguf"));
  const std::vector<uint8_t> b = read_bytes(write(two, dir, "b.gguf"));
  const std::vector<uint8_t> c = read_bytes(write(one, dir, "c.gguf"));
  ASSERT_GT(a.size(), 100000u);
  EXPECT_TRUE(a == b) << "1 vs 2 threads";
  EXPECT_TRUE(a == c) << "two runs";
  EXPECT_FALSE(std::filesystem::exists(dir + "/a.gguf.partial"));

  SyntheticModelSpec other = one;
  other.seed = 8;
  const std::vector<uint8_t> d = read_bytes(write(other, dir, "d.gguf"));
  ASSERT_EQ(d.size(), a.size());
  EXPECT_FALSE(d == a) << "another seed gives other weights";
}

TEST(SyntheticModel, WritesTheLlamaKeys) {
  const std::string dir = testing::scratch_dir("synthetic_keys");
  SyntheticModelSpec s = tiny(WeightType::Q4_0);
  s.n_ctx = 1024;
  s.rope_base = 500000.0f;
  const auto summary = write_synthetic_model(s, dir + "/m.gguf");
  const auto f = gguf::File::open(dir + "/m.gguf");
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_string("general.name"), "glacier-synthetic");
  EXPECT_EQ(f->get_uint("general.file_type"), 2u);  // llama.cpp's MOSTLY_Q4_0
  EXPECT_EQ(f->get_uint("general.quantization_version"), 2u);
  EXPECT_EQ(f->get_uint("llama.context_length"), 1024u);
  EXPECT_EQ(f->get_uint("llama.embedding_length"), 64u);
  EXPECT_EQ(f->get_uint("llama.block_count"), 2u);
  EXPECT_EQ(f->get_uint("llama.feed_forward_length"), 128u);
  EXPECT_EQ(f->get_uint("llama.attention.head_count"), 4u);
  EXPECT_EQ(f->get_uint("llama.attention.head_count_kv"), 2u);
  EXPECT_FLOAT_EQ(static_cast<float>(f->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f->get_float("llama.rope.freq_base"), 500000.0);
  EXPECT_EQ(f->get_uint("llama.rope.dimension_count"), 16u);  // 64 / 4 heads
  EXPECT_EQ(f->get_uint("llama.vocab_size"), static_cast<uint64_t>(summary.n_vocab));
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_GE(summary.n_vocab, 512);
  EXPECT_EQ(summary.file_bytes, std::filesystem::file_size(dir + "/m.gguf"));

  // 2-D weights (token_embd and output too) get the type; norms stay f32.
  uint64_t params = 0;
  for (const gguf::TensorInfo& t : f->tensors()) {
    params += static_cast<uint64_t>(t.n_elements());
    EXPECT_EQ(t.type, t.n_dims == 1 ? gguf::TensorType::F32 : gguf::TensorType::Q4_0) << t.name;
  }
  EXPECT_EQ(f->tensors().size(), 2u + 2u * 9u + 1u);
  EXPECT_EQ(summary.n_params, params);
  EXPECT_EQ(f->find_tensor("output.weight")->ne[1], summary.n_vocab);
}

class SyntheticModelTypes : public ::testing::TestWithParam<WeightType> {};

TEST_P(SyntheticModelTypes, LoadsAndRunsAForwardPassWithFiniteLogits) {
  const std::string dir = testing::scratch_dir(std::string("synthetic_forward_") + kernels::weight_type_name(GetParam()));
  const std::string path = write(tiny(GetParam()), dir, "m.gguf");

  // The loading steps of a rank, one by one.
  const auto file = gguf::File::open(path);
  const ModelConfig cfg = read_model_config(*file);
  EXPECT_EQ(cfg.arch, "llama");
  EXPECT_EQ(cfg.n_embd, 64);
  EXPECT_EQ(cfg.n_layer, 2);
  EXPECT_EQ(cfg.head_dim, 16);
  EXPECT_EQ(cfg.n_head_kv, 2);
  const ShardWeights w = load_shard(*file, cfg, {0, cfg.n_layer}, true, true);
  EXPECT_EQ(w.layer.size(), 2u);
  const auto tok = Tokenizer::from_gguf(*file);
  EXPECT_EQ(tok->n_vocab(), cfg.n_vocab);

  expect_forward_pass_runs(path, cfg.n_vocab);
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, SyntheticModelTypes,
                         ::testing::Values(WeightType::F32, WeightType::F16, WeightType::BF16, WeightType::Q8_0,
                                           WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1,
                                           WeightType::IQ4_NL),
                         [](const auto& info) { return std::string(kernels::weight_type_name(info.param)); });

// qwen3moe with a head width other than n_embd / n_head (16): q is 128 wide, attn_output maps it back to 64.
SyntheticModelSpec tiny_qwen3moe(WeightType t = WeightType::F32, uint64_t seed = 1) {
  SyntheticModelSpec s = tiny(t, seed);
  s.arch = "qwen3moe";
  s.qwen3moe = {.head_dim = 32, .n_expert = 8, .n_expert_used = 2, .n_ff_expert = 32};
  return s;
}

// The spec of the shared synth-qwen3moe-f32.gguf's shape, read from its keys, with its vocabulary copied.
SyntheticModelSpec shared_qwen3moe_shape(const gguf::File& f, const std::string& path, WeightType t) {
  SyntheticModelSpec s = tiny_qwen3moe(t);
  s.vocab_from = path;
  s.n_vocab = 0;
  s.n_ctx = static_cast<int32_t>(f.get_uint("qwen3moe.context_length"));
  s.n_embd = static_cast<int32_t>(f.get_uint("qwen3moe.embedding_length"));
  s.n_layer = static_cast<int32_t>(f.get_uint("qwen3moe.block_count"));
  s.n_ff = static_cast<int32_t>(f.get_uint("qwen3moe.feed_forward_length"));
  s.n_head = static_cast<int32_t>(f.get_uint("qwen3moe.attention.head_count"));
  s.n_head_kv = static_cast<int32_t>(f.get_uint("qwen3moe.attention.head_count_kv"));
  s.rms_eps = static_cast<float>(f.get_float("qwen3moe.attention.layer_norm_rms_epsilon"));
  s.rope_base = static_cast<float>(f.get_float("qwen3moe.rope.freq_base"));
  s.qwen3moe.head_dim = static_cast<int32_t>(f.get_uint("qwen3moe.attention.key_length"));
  s.qwen3moe.n_expert = static_cast<int32_t>(f.get_uint("qwen3moe.expert_count"));
  s.qwen3moe.n_expert_used = static_cast<int32_t>(f.get_uint("qwen3moe.expert_used_count"));
  s.qwen3moe.n_ff_expert = static_cast<int32_t>(f.get_uint("qwen3moe.expert_feed_forward_length"));
  return s;
}

class SyntheticQwen3Moe : public ::testing::TestWithParam<WeightType> {};

// The shared file was written with llama.cpp's gguf-py in the layout of llama.cpp's qwen3moe loader; its q8_0
// twin would come from `llama-quantize --pure`, which quantizes every 2-D and 3-D weight but the router.
TEST_P(SyntheticQwen3Moe, HasTheKeysAndTensorsOfTheSharedSynthQwen3MoeFile) {
  GLACIER_REQUIRE_SHARED(shared_path, "models/synthetic/synth-qwen3moe-f32.gguf");
  const WeightType type = GetParam();
  const auto ref = gguf::File::open(shared_path);
  const std::string dir = testing::scratch_dir(std::string("synthetic_qwen3moe_layout_") + kernels::weight_type_name(type));
  const auto f = gguf::File::open(write(shared_qwen3moe_shape(*ref, shared_path, type), dir, "m.gguf"));

  // The same keys with the same values, but for the name and what the weight type decides.
  std::set<std::string> keys, ref_keys;
  for (const auto& [key, value] : f->metadata()) keys.insert(key);
  for (const auto& [key, value] : ref->metadata()) ref_keys.insert(key);
  if (type != WeightType::F32) ref_keys.insert("general.quantization_version");
  EXPECT_EQ(keys, ref_keys);
  for (const auto& [key, value] : ref->metadata()) {
    if (key == "general.name" || key == "general.file_type") continue;
    const gguf::Value* mine = f->find(key);
    ASSERT_NE(mine, nullptr) << key;
    EXPECT_TRUE(testing::same_gguf_value(*mine, value)) << key;
  }
  EXPECT_EQ(f->get_uint("general.file_type"), type == WeightType::F32 ? 0u : 7u);  // llama.cpp's ALL_F32 / MOSTLY_Q8_0

  // The same tensors in the same order and shapes; the router and the 1-D norms stay f32.
  ASSERT_EQ(f->tensors().size(), ref->tensors().size());
  for (size_t i = 0; i < ref->tensors().size(); ++i) {
    const gguf::TensorInfo& a = f->tensors()[i];
    const gguf::TensorInfo& b = ref->tensors()[i];
    EXPECT_EQ(a.name, b.name) << "tensor " << i;
    EXPECT_EQ(a.n_dims, b.n_dims) << b.name;
    for (int d = 0; d < 4; ++d) EXPECT_EQ(a.ne[d], b.ne[d]) << b.name << " ne[" << d << "]";
    const bool stays_f32 = b.n_dims == 1 || b.name.find("ffn_gate_inp") != std::string::npos;
    EXPECT_EQ(a.type, stays_f32 || type == WeightType::F32 ? gguf::TensorType::F32 : gguf::TensorType::Q8_0) << b.name;
  }
  EXPECT_EQ(f->find_tensor("blk.0.ffn_down_exps.weight")->n_dims, 3);
}

INSTANTIATE_TEST_SUITE_P(F32AndQ8, SyntheticQwen3Moe, ::testing::Values(WeightType::F32, WeightType::Q8_0),
                         [](const auto& info) { return std::string(kernels::weight_type_name(info.param)); });

TEST_P(SyntheticQwen3Moe, LoadsAndRunsAForwardPassWithFiniteLogitsAndTheSameBytesEachTime) {
  const WeightType type = GetParam();
  const std::string dir = testing::scratch_dir(std::string("synthetic_qwen3moe_forward_") + kernels::weight_type_name(type));
  const std::string path = write(tiny_qwen3moe(type, 5), dir, "m.gguf");
  SyntheticModelSpec two_threads = tiny_qwen3moe(type, 5);
  two_threads.threads = 2;
  EXPECT_TRUE(read_bytes(path) == read_bytes(write(two_threads, dir, "again.gguf"))) << "same options, other bytes";
  EXPECT_FALSE(read_bytes(path) == read_bytes(write(tiny_qwen3moe(type, 6), dir, "seed6.gguf"))) << "another seed";

  const auto file = gguf::File::open(path);
  const ModelConfig cfg = read_model_config(*file);
  EXPECT_EQ(cfg.arch, "qwen3moe");
  EXPECT_EQ(cfg.head_dim, 32);
  EXPECT_EQ(cfg.q_dim(), 128);
  EXPECT_EQ(cfg.n_expert, 8);
  EXPECT_EQ(cfg.n_expert_used, 2);
  EXPECT_EQ(cfg.n_ff_expert, 32);

  expect_forward_pass_runs(path, cfg.n_vocab);
}

// A K-quant mix on qwen3moe: llama-quantize's per-tensor rules by name (k_quant_mix_test.cpp has the table), here
// checked on the written file, stacked experts included, with 8 experts (its attn_k/attn_v/attn_output overrides)
// and with 4; the file loads and runs.
TEST(SyntheticModel, Qwen3MoeKQuantMixFileCarriesTheMixTypesAndRuns) {
  const std::string dir = testing::scratch_dir("synthetic_qwen3moe_mix");
  for (const int32_t n_expert : {8, 4}) {
    SyntheticModelSpec s = tiny_qwen3moe();
    s.n_embd = 256;
    s.n_layer = 8;
    s.qwen3moe = {.head_dim = 64, .n_expert = n_expert, .n_expert_used = 2, .n_ff_expert = 256};
    set_synthetic_type(s, "q4_k_m");
    const std::string path = write(s, dir, "m" + std::to_string(n_expert) + ".gguf");
    const auto f = gguf::File::open(path);
    EXPECT_EQ(f->get_uint("general.file_type"), 15u);
    const MixModelShape shape{s.n_layer, s.n_head, s.n_head_kv, n_expert, "qwen3moe"};
    auto gguf_of = [](WeightType t) {
      switch (t) {
        case WeightType::Q4_K: return gguf::TensorType::Q4_K;
        case WeightType::Q5_K: return gguf::TensorType::Q5_K;
        case WeightType::Q6_K: return gguf::TensorType::Q6_K;
        case WeightType::Q8_0: return gguf::TensorType::Q8_0;
        default: return gguf::TensorType::F32;
      }
    };
    std::set<gguf::TensorType> expert_down_types;
    for (const gguf::TensorInfo& t : f->tensors()) {
      const bool stays_f32 = t.n_dims == 1 || t.name.find("ffn_gate_inp") != std::string::npos;
      EXPECT_EQ(t.type, stays_f32 ? gguf::TensorType::F32 : gguf_of(k_quant_mix_type(KQuantMix::Q4_K_M, t.name, shape)))
          << t.name << " with " << n_expert << " experts";
      if (t.name.find("ffn_down_exps") != std::string::npos) expert_down_types.insert(t.type);
    }
    // The rules bite: use_more_bits gives some layers' experts Q6_K; 8 experts raise attn_k/attn_v to Q8_0.
    EXPECT_EQ(expert_down_types, (std::set<gguf::TensorType>{gguf::TensorType::Q4_K, gguf::TensorType::Q6_K}));
    EXPECT_EQ(f->find_tensor("blk.1.attn_k.weight")->type, n_expert == 8 ? gguf::TensorType::Q8_0 : gguf::TensorType::Q4_K);
    testing::EngineHarness h(path, 128, 2, 64, 1);
    const std::vector<float> logits = h.all_logits(h.tok->encode("Once upon a time", true, false));
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST(SyntheticModel, Qwen3MoeBadSpecsAreInputErrorsNamingTheOption) {
  const std::string dir = testing::scratch_dir("synthetic_qwen3moe_errors");
  auto error_for = [&](auto change) {
    SyntheticModelSpec s = tiny_qwen3moe(WeightType::Q8_0);
    change(s);
    return refusal_message([&] { write_synthetic_model(s, dir + "/m.gguf"); });
  };
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.qwen3moe.n_ff_expert = 48; })
                .find("--n-ff-expert: expected a multiple of 32 (the block size of --type q8_0), found 48"),
            std::string::npos);
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.qwen3moe.head_dim = 6; })
                .find("--head-dim: expected a multiple of 32 (the block size of --type q8_0) for n_head x head_dim"),
            std::string::npos);
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.qwen3moe.head_dim = 31; }).find("--head-dim: expected an even width"),
            std::string::npos);
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.qwen3moe.n_expert_used = 9; }).find("--n-expert-used: expected at most --n-expert"),
            std::string::npos);
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { set_synthetic_type(s, "q4_k_m"), s.n_embd = 256, s.qwen3moe.head_dim = 64; })
                .find("--n-ff-expert: expected a multiple of 256 (the block size of --type q4_k_m), found 32"),
            std::string::npos);
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.arch = "llama"; })
                .find("--head-dim: expected no head width for --arch llama"),
            std::string::npos);
  // feed_forward_length is only a key for qwen3moe, so it need not be a multiple of the block.
  EXPECT_EQ(error_for([](SyntheticModelSpec& s) { s.n_ff = 100; }), "");
  EXPECT_FALSE(std::filesystem::exists(dir + "/m.gguf.partial"));
}

TEST(SyntheticModel, WeightsFollowTheStatedDistributions) {
  const std::string dir = testing::scratch_dir("synthetic_stats");
  SyntheticModelSpec s = tiny();
  s.n_embd = 256;
  s.n_ff = 512;
  s.n_head = 8;
  s.n_head_kv = 8;
  const auto f = gguf::File::open(write(s, dir, "m.gguf"));
  expect_moments(f32_tensor(*f, "token_embd.weight"), 0.0, 0.5, "token_embd");
  expect_moments(f32_tensor(*f, "blk.0.attn_q.weight"), 0.0, 1.0 / std::sqrt(256.0), "attn_q");
  expect_moments(f32_tensor(*f, "blk.1.ffn_down.weight"), 0.0, 1.0 / std::sqrt(512.0), "ffn_down");
  expect_moments(f32_tensor(*f, "output.weight"), 0.0, 1.0 / std::sqrt(256.0), "output");
  std::vector<float> norms;
  for (const char* name : {"blk.0.attn_norm.weight", "blk.0.ffn_norm.weight", "blk.1.attn_norm.weight",
                           "blk.1.ffn_norm.weight", "output_norm.weight"}) {
    const std::vector<float> v = f32_tensor(*f, name);
    norms.insert(norms.end(), v.begin(), v.end());
  }
  expect_moments(norms, 1.0, 0.05, "norms");
  // Distinct tensors get distinct streams.
  EXPECT_NE(f32_tensor(*f, "blk.0.attn_q.weight"), f32_tensor(*f, "blk.1.attn_q.weight"));
}

TEST(SyntheticModel, QuantizedModelEncodesTheSameDraws) {
  const std::string dir = testing::scratch_dir("synthetic_same_draws");
  const auto f32 = gguf::File::open(write(tiny(WeightType::F32), dir, "f32.gguf"));
  const auto q8 = gguf::File::open(write(tiny(WeightType::Q8_0), dir, "q8.gguf"));
  const ModelConfig cfg = read_model_config(*f32);
  const ShardWeights a = load_shard(*f32, cfg, {0, cfg.n_layer}, true, true);
  const ShardWeights b = load_shard(*q8, cfg, {0, cfg.n_layer}, true, true);
  auto compare = [](const kernels::Matrix& x, const kernels::Matrix& y, const char* what) {
    std::vector<float> rx(static_cast<size_t>(x.cols)), ry(rx.size());
    for (int64_t r = 0; r < x.rows; ++r) {
      kernels::dequantize_row(x, r, rx.data());
      kernels::dequantize_row(y, r, ry.data());
      for (int64_t blk = 0; blk < x.cols / 32; ++blk) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(rx[blk * 32 + j]));
        for (int j = 0; j < 32; ++j)
          ASSERT_NEAR(ry[blk * 32 + j], rx[blk * 32 + j], kQ8ErrorInSteps * amax / 127.0) << what << " row " << r;
      }
    }
  };
  compare(a.token_embd, b.token_embd, "token_embd");
  compare(a.layer[1].wk, b.layer[1].wk, "blk.1.attn_k");
  compare(a.layer[0].w_down, b.layer[0].w_down, "blk.0.ffn_down");
  compare(a.output, b.output, "output");
  EXPECT_EQ(a.layer[1].ffn_norm, b.layer[1].ffn_norm);  // norms stay f32, same draws
}

TEST(SyntheticModel, ChunkedTensorsHoldTheSameRowsAsUnchunkedOnes) {
  // Rows are drawn from streams keyed by (seed, tensor, row), so the first 64 entries of a 512-wide
  // embedding row equal a 64-wide model's row. The 512-wide embedding (41 MB) is written in two
  // chunks of 32 MiB; the 64-wide one in a single chunk.
  const std::string dir = testing::scratch_dir("synthetic_chunks");
  SyntheticModelSpec wide = tiny();
  wide.n_embd = 512;
  wide.n_head = 8;
  wide.n_head_kv = 8;
  wide.n_ff = 32;
  wide.n_layer = 1;
  wide.n_vocab = 20000;
  wide.threads = 2;
  SyntheticModelSpec narrow = tiny();
  narrow.n_vocab = 20000;
  const std::string wide_path = write(wide, dir, "wide.gguf");
  const std::string narrow_path = write(narrow, dir, "narrow.gguf");
  {
    const auto w = gguf::File::open(wide_path);
    const auto n = gguf::File::open(narrow_path);
    const std::vector<float> we = f32_tensor(*w, "token_embd.weight");
    const std::vector<float> ne = f32_tensor(*n, "token_embd.weight");
    ASSERT_EQ(we.size(), size_t{20000} * 512);
    for (size_t r = 0; r < 20000; ++r)
      for (size_t i = 0; i < 64; ++i) ASSERT_EQ(we[r * 512 + i], ne[r * 64 + i]) << "row " << r << " col " << i;
  }
  std::filesystem::remove_all(dir);
}

TEST(SyntheticVocabulary, TokenizesEnglishIntoWords) {
  const std::string dir = testing::scratch_dir("synthetic_tokenize");
  const auto f = gguf::File::open(write(tiny(), dir, "m.gguf"));
  const auto tok = Tokenizer::from_gguf(*f);
  const std::vector<int32_t> ids = tok->encode("Once upon a time, there was a little girl named Lily.", true, false);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(tok->token_text(id));
  const std::vector<std::string> want = {"<s>", "▁Once", "▁upon", "▁a", "▁time", ",", "▁there", "▁was",
                                         "▁a", "▁little", "▁girl", "▁named", "▁Lily", "."};
  EXPECT_EQ(pieces, want);
  // Unknown words fall back to shorter pieces, and non-ASCII text to byte tokens; decoding restores it.
  const std::string odd = "Zebras quietly café";
  EXPECT_EQ(tok->decode(tok->encode(odd, false, false)), " " + odd);
}

TEST(SyntheticVocabulary, HasSpecialAndByteTokensAndIsPaddedToSize) {
  for (int32_t n : {SyntheticVocab::kMinSize, 600, builtin_vocab_size(), 5000, 32000}) {
    const SyntheticVocab v = make_synthetic_vocab(n);
    ASSERT_EQ(v.tokens.size(), static_cast<size_t>(n));
    ASSERT_EQ(v.scores.size(), v.tokens.size());
    ASSERT_EQ(v.types.size(), v.tokens.size());
    EXPECT_EQ(v.tokens[0], "<unk>");
    EXPECT_EQ(v.types[0], static_cast<int32_t>(TokenType::Unknown));
    EXPECT_EQ(v.tokens[1], "<s>");
    EXPECT_EQ(v.tokens[2], "</s>");
    EXPECT_EQ(v.types[2], static_cast<int32_t>(TokenType::Control));
    EXPECT_EQ(v.tokens[3], "<0x00>");
    EXPECT_EQ(v.tokens[3 + 0x41], "<0x41>");
    EXPECT_EQ(v.tokens[258], "<0xFF>");
    for (int i = 3; i < 259; ++i) EXPECT_EQ(v.types[i], static_cast<int32_t>(TokenType::Byte));
    EXPECT_EQ(std::set<std::string>(v.tokens.begin(), v.tokens.end()).size(), v.tokens.size()) << "unique texts";
    // Longer normal pieces score higher, so merges prefer whole words.
    auto chars = [](const std::string& s) {
      int c = 0;
      for (unsigned char b : s) c += (b & 0xC0) != 0x80;
      return c;
    };
    for (size_t i = 259; i + 1 < v.tokens.size(); ++i) {
      ASSERT_EQ(v.types[i], static_cast<int32_t>(TokenType::Normal));
      if (chars(v.tokens[i + 1]) > chars(v.tokens[i])) {
        ASSERT_GT(v.scores[i + 1], v.scores[i]) << v.tokens[i + 1];
      } else if (chars(v.tokens[i + 1]) < chars(v.tokens[i])) {
        ASSERT_LT(v.scores[i + 1], v.scores[i]) << v.tokens[i + 1];
      }
    }
  }
}

TEST(SyntheticModel, VocabFromCopiesEveryTokenizerKey) {
  GLACIER_REQUIRE_SHARED(vocab_path, "models/vocab/ggml-vocab-llama-spm.gguf");
  const std::string dir = testing::scratch_dir("synthetic_vocab_from");
  SyntheticModelSpec s = tiny(WeightType::Q8_0);
  s.vocab_from = vocab_path;
  const auto summary = write_synthetic_model(s, dir + "/m.gguf");
  EXPECT_EQ(summary.n_vocab, 32000);
  const auto vocab = gguf::File::open(vocab_path);
  const auto model = gguf::File::open(dir + "/m.gguf");
  int copied = 0;
  for (const auto& [key, value] : vocab->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    const gguf::Value* got = model->find(key);
    ASSERT_NE(got, nullptr) << key;
    EXPECT_TRUE(testing::same_gguf_value(value, *got)) << key;
    ++copied;
  }
  EXPECT_GE(copied, 4);
  int model_tokenizer_keys = 0;
  for (const auto& kv : model->metadata()) model_tokenizer_keys += kv.first.rfind("tokenizer.", 0) == 0;
  EXPECT_EQ(model_tokenizer_keys, copied);
  EXPECT_EQ(model->get_uint("llama.vocab_size"), 32000u);
  EXPECT_EQ(model->find_tensor("token_embd.weight")->ne[1], 32000);

  const auto t_model = Tokenizer::from_gguf(*model);
  const auto t_vocab = Tokenizer::from_gguf(*vocab);
  const std::string text = "Hello world, this is a test of the vocabulary copy.";
  EXPECT_EQ(t_model->encode(text, true, false), t_vocab->encode(text, true, false));

  testing::EngineHarness h(dir + "/m.gguf", 64, 1, 64, 1);
  for (float x : h.all_logits(h.tok->encode(text, true, false))) ASSERT_TRUE(std::isfinite(x));

  // A different --n-vocab cannot go with the file's vocabulary.
  s.n_vocab = 1000;
  EXPECT_NE(refusal_message([&] { write_synthetic_model(s, dir + "/bad.gguf"); }).find("--n-vocab"), std::string::npos);
}

TEST(SyntheticModel, BadSpecsAreInputErrorsNamingTheOption) {
  const std::string dir = testing::scratch_dir("synthetic_errors");
  auto error_for = [&](auto change) {
    SyntheticModelSpec s = tiny(WeightType::Q8_0);
    change(s);
    return refusal_message([&] { write_synthetic_model(s, dir + "/m.gguf"); });
  };
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.n_head = 5; }).find("--n-head: expected a divisor of --n-embd 64, found 5"),
            std::string::npos);
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.n_head_kv = 3; }).find("--n-head-kv"), std::string::npos);
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.n_embd = 48, s.n_head = 3, s.n_head_kv = 3; }).find("--n-embd: expected a multiple of 32"),
            std::string::npos);
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.n_ff = 100; }).find("--n-ff"), std::string::npos);
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.n_layer = 0; }).find("--n-layer"), std::string::npos);
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.n_vocab = 100; }).find("--n-vocab: expected at least 259"),
            std::string::npos);
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.rope_base = 1.0f; }).find("--rope-base"), std::string::npos);
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.vocab_from = "/nonexistent/v.gguf"; }).find("/nonexistent/v.gguf"),
            std::string::npos);
  EXPECT_NE(refusal_message([&] { write_synthetic_model(tiny(), "/nonexistent-dir/m.gguf"); }).find("--out"),
            std::string::npos);
  EXPECT_NE(refusal_message([] { synthetic_preset("huge"); })
                .find("--preset: expected tiny, llama-1b, llama-7b or qwen3moe-1.4b, found 'huge'"),
            std::string::npos);
  EXPECT_NE(error_for([](SyntheticModelSpec& s) { s.weight_type = WeightType::IQ4_XS; })
                .find("--n-embd: expected a multiple of 256 (the block size of --type iq4_xs), found 64"),
            std::string::npos);
  EXPECT_NE(refusal_message([] { synthetic_weight_type("q8_1"); })
                .find("--type: expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs, q2_k, q3_k, q4_k, "
                      "q5_k, q6_k or a K-quant mix (q3_k_s, q3_k_m, q3_k_l, q4_k_s, q4_k_m, q5_k_s, q5_k_m), found 'q8_1'"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/m.gguf"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/m.gguf.partial"));
}

TEST(SyntheticModel, PresetsHaveTheStatedShapes) {
  // name, n_embd, n_layer, n_ff, n_head, n_head_kv
  const std::tuple<const char*, int32_t, int32_t, int32_t, int32_t, int32_t> llamas[] = {
      {"llama-1b", 2048, 16, 8192, 32, 8},
      {"llama-7b", 4096, 32, 11008, 32, 32},
  };
  for (const auto& [name, n_embd, n_layer, n_ff, n_head, n_head_kv] : llamas) {
    SCOPED_TRACE(name);
    const SyntheticModelSpec s = synthetic_preset(name);
    EXPECT_EQ(s.n_embd, n_embd);
    EXPECT_EQ(s.n_layer, n_layer);
    EXPECT_EQ(s.n_ff, n_ff);
    EXPECT_EQ(s.n_head, n_head);
    EXPECT_EQ(s.n_head_kv, n_head_kv);
    EXPECT_EQ(s.n_vocab, 32000);
  }
  const SyntheticModelSpec q = synthetic_preset("qwen3moe-1.4b");
  EXPECT_EQ(q.arch, "qwen3moe");
  EXPECT_EQ(q.n_embd, 1024);
  EXPECT_EQ(q.n_layer, 24);
  EXPECT_EQ(q.n_head, 16);
  EXPECT_EQ(q.n_head_kv, 4);
  EXPECT_EQ(q.qwen3moe.head_dim, 128);
  EXPECT_EQ(q.qwen3moe.n_expert, 64);
  EXPECT_EQ(q.qwen3moe.n_expert_used, 8);
  EXPECT_EQ(q.qwen3moe.n_ff_expert, 256);
  EXPECT_EQ(q.n_ff, q.qwen3moe.n_expert_used * q.qwen3moe.n_ff_expert);
  EXPECT_EQ(q.n_vocab, 32000);
  const std::pair<const char*, WeightType> types[] = {
      {"q4_0", WeightType::Q4_0},     {"bf16", WeightType::BF16},     {"q4_1", WeightType::Q4_1},
      {"q5_0", WeightType::Q5_0},     {"q5_1", WeightType::Q5_1},     {"iq4_nl", WeightType::IQ4_NL},
      {"iq4_xs", WeightType::IQ4_XS}, {"q2_k", WeightType::Q2_K},     {"q3_k", WeightType::Q3_K},
      {"q4_k", WeightType::Q4_K},     {"q5_k", WeightType::Q5_K},     {"q6_k", WeightType::Q6_K},
  };
  for (const auto& [name, type] : types) EXPECT_EQ(synthetic_weight_type(name), type) << name;
  SyntheticModelSpec s;
  set_synthetic_type(s, "q5_k_m");
  EXPECT_EQ(s.weight_type, WeightType::Q5_K);
  EXPECT_EQ(s.k_quant_mix, KQuantMix::Q5_K_M);
  set_synthetic_type(s, "q2_k");
  EXPECT_EQ(s.weight_type, WeightType::Q2_K);
  EXPECT_EQ(s.k_quant_mix, KQuantMix::None);
}

TEST(SyntheticNormal, IsDeterministicAndStandard) {
  constexpr int64_t kN = 200001;  // odd: the last Box-Muller pair is cut in half
  std::vector<float> a(kN), b(kN), c(kN), prefix(3);
  fill_standard_normal(42, a.data(), kN);
  fill_standard_normal(42, b.data(), kN);
  fill_standard_normal(43, c.data(), kN);
  fill_standard_normal(42, prefix.data(), 3);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), a.begin()));
  expect_moments(a, 0.0, 1.0, "seed 42");
  // The tails are there too: a fraction of about 0.0027 lies beyond 3 sigma.
  const double beyond = static_cast<double>(std::count_if(a.begin(), a.end(), [](float x) { return std::fabs(x) > 3.0f; })) / kN;
  EXPECT_NEAR(beyond, 0.0027, kStandardErrors * std::sqrt(0.0027 / kN));
  for (float x : a) ASSERT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace glacier::model
