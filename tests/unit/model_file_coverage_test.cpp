// Nothing in a model file silently ignored: a synthetic model with one extra key or tensor is refused
// with a message naming that key or tensor and the file; harmless extras still load.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/gguf_copy.h"
#include "common/test_env.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/synthetic_model.h"
#include "util/error.h"

namespace glacier::model {
namespace {

// One scratch directory for the test binary (scratch_dir makes a fresh one each call).
const std::string& scratch() {
  static const std::string dir = glacier::testing::scratch_dir("file_coverage");
  return dir;
}

const std::string& base_model() {
  static const std::string path = [] {
    const std::string p = scratch() + "/base.gguf";
    SyntheticModelSpec s;  // tiny: 2 layers, 64 wide, built-in vocabulary
    s.threads = 1;
    write_synthetic_model(s, p);
    return p;
  }();
  return path;
}

using Edit = void (*)(gguf::Writer&);

// A copy of the base model with `edit` applied after its keys and tensors, as `name`.
std::string edited_copy(const std::string& name, Edit edit) {
  auto f = gguf::File::open(base_model());
  gguf::Writer w;
  glacier::testing::copy_keys(*f, w);
  glacier::testing::copy_tensors(*f, w);
  edit(w);
  const std::string path = scratch() + "/" + name;
  w.write(path);
  return path;
}

using glacier::testing::model_load_refusal;

std::vector<uint8_t> f32_bytes(size_t n, float v) {
  std::vector<uint8_t> b(n * 4);
  for (size_t i = 0; i < n; ++i) std::memcpy(b.data() + 4 * i, &v, 4);
  return b;
}

TEST(ModelFileCoverage, BaseModelLoads) { EXPECT_EQ(model_load_refusal(base_model()), ""); }

struct Extra {
  const char* file;
  const char* named;  // the key or tensor the message must name
  Edit edit;
};

// One unimplemented key or tensor per file, each of a kind real GGUF files carry.
const Extra kExtras[] = {
    {"softcap.gguf", "llama.attn_logit_softcapping", [](gguf::Writer& w) { w.set_f32("llama.attn_logit_softcapping", 50.0f); }},
    {"final_softcap.gguf", "llama.final_logit_softcapping",
     [](gguf::Writer& w) { w.set_f32("llama.final_logit_softcapping", 30.0f); }},
    {"embedding_scale.gguf", "llama.embedding_scale", [](gguf::Writer& w) { w.set_f32("llama.embedding_scale", 12.0f); }},
    {"residual_scale.gguf", "llama.residual_scale", [](gguf::Writer& w) { w.set_f32("llama.residual_scale", 0.2f); }},
    {"logit_scale.gguf", "llama.logit_scale", [](gguf::Writer& w) { w.set_f32("llama.logit_scale", 0.25f); }},
    {"parallel_residual.gguf", "llama.use_parallel_residual",
     [](gguf::Writer& w) { w.set_bool("llama.use_parallel_residual", true); }},
    {"clamp_kqv.gguf", "llama.attention.clamp_kqv", [](gguf::Writer& w) { w.set_f32("llama.attention.clamp_kqv", 8.0f); }},
    {"layer_norm_eps.gguf", "llama.attention.layer_norm_epsilon",
     [](gguf::Writer& w) { w.set_f32("llama.attention.layer_norm_epsilon", 1e-5f); }},
    {"sliding_window.gguf", "llama.attention.sliding_window",
     [](gguf::Writer& w) { w.set_u32("llama.attention.sliding_window", 16); }},
    {"expert_weights_scale.gguf", "llama.expert_weights_scale",
     [](gguf::Writer& w) { w.set_f32("llama.expert_weights_scale", 2.5f); }},
    {"attention_scale.gguf", "llama.attention.scale", [](gguf::Writer& w) { w.set_f32("llama.attention.scale", 0.1f); }},
    {"causal.gguf", "llama.attention.causal", [](gguf::Writer& w) { w.set_bool("llama.attention.causal", false); }},
    {"rope_yarn_log_mul.gguf", "llama.rope.scaling.yarn_log_multiplier",
     [](gguf::Writer& w) { w.set_f32("llama.rope.scaling.yarn_log_multiplier", 0.1f); }},
    {"rope_sections.gguf", "llama.rope.dimension_sections",
     [](gguf::Writer& w) { w.set_i32_array("llama.rope.dimension_sections", {4, 4, 0, 0}); }},
    {"other_arch_key.gguf", "qwen2.rope.freq_base", [](gguf::Writer& w) { w.set_f32("qwen2.rope.freq_base", 1e6f); }},
    {"adapter.gguf", "adapter.type", [](gguf::Writer& w) { w.set_string("adapter.type", "lora"); }},
    {"rope_scaling_longrope.gguf", "llama.rope.scaling.type",
     [](gguf::Writer& w) {
       w.set_string("llama.rope.scaling.type", "longrope");
       w.set_f32("llama.rope.scaling.factor", 4.0f);
     }},
    {"rope_scaling_negative.gguf", "llama.rope.scaling.factor",
     [](gguf::Writer& w) {
       w.set_string("llama.rope.scaling.type", "linear");
       w.set_f32("llama.rope.scaling.factor", -2.0f);
     }},
    {"rope_attn_factor_zero.gguf", "llama.rope.scaling.attn_factor",
     [](gguf::Writer& w) { w.set_f32("llama.rope.scaling.attn_factor", 0.0f); }},
    {"rope_freqs_shape.gguf", "rope_freqs.weight",  // tiny: head 16, so 8 pairs
     [](gguf::Writer& w) { w.add_tensor("rope_freqs.weight", gguf::TensorType::F32, {16}, f32_bytes(16, 2.0f)); }},
    {"rope_freqs_zero.gguf", "rope_freqs.weight",
     [](gguf::Writer& w) { w.add_tensor("rope_freqs.weight", gguf::TensorType::F32, {8}, f32_bytes(8, 0.0f)); }},
    {"rope_factors_long.gguf", "rope_factors_long.weight",
     [](gguf::Writer& w) { w.add_tensor("rope_factors_long.weight", gguf::TensorType::F32, {8}, f32_bytes(8, 2.0f)); }},
    {"extra_layer_tensor.gguf", "blk.1.attn_q.bias",
     [](gguf::Writer& w) { w.add_tensor("blk.1.attn_q.bias", gguf::TensorType::F32, {64}, f32_bytes(64, 0.5f)); }},
    {"layer_past_the_end.gguf", "blk.2.attn_norm.weight",
     [](gguf::Writer& w) { w.add_tensor("blk.2.attn_norm.weight", gguf::TensorType::F32, {64}, f32_bytes(64, 1.0f)); }},
};

TEST(ModelFileCoverage, EachUnimplementedKeyOrTensorIsRefusedByName) {
  for (const Extra& x : kExtras) {
    SCOPED_TRACE(x.file);
    const std::string path = edited_copy(x.file, x.edit);
    const std::string msg = model_load_refusal(path);
    EXPECT_NE(msg.find(std::string("'") + x.named + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  }
}

// rope_freqs.weight is Llama 3's: on another architecture it is refused, not ignored.
TEST(ModelFileCoverage, RopeFreqsOnAnotherArchitectureIsRefused) {
  GLACIER_REQUIRE_SHARED(qwen2, "models/synthetic/synth-qwen2-f32.gguf");
  auto f = gguf::File::open(qwen2);
  gguf::Writer w;
  glacier::testing::copy_keys(*f, w);
  glacier::testing::copy_tensors(*f, w);
  w.add_tensor("rope_freqs.weight", gguf::TensorType::F32, {16}, f32_bytes(16, 2.0f));
  const std::string path = scratch() + "/qwen2_rope_freqs.gguf";
  w.write(path);
  const std::string msg = model_load_refusal(path);
  EXPECT_NE(msg.find("'rope_freqs.weight'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'qwen2'"), std::string::npos) << msg;
}

// Keys that do not change the computation load, and the dense model's "no experts".
TEST(ModelFileCoverage, HarmlessKeysLoad) {
  const std::string path = edited_copy("harmless.gguf", [](gguf::Writer& w) {
    w.set_string("general.license", "mit");
    w.set_string("quantize.imatrix.file", "imatrix.dat");
    w.set_bool("llama.rope.scaling.finetuned", false);
    w.set_u32("llama.expert_count", 0);
    w.set_u32("llama.expert_used_count", 0);
    w.set_string("llama.rope.scaling.type", "none");
    w.set_string("tokenizer.chat_template", "{{ messages }}");
  });
  EXPECT_EQ(model_load_refusal(path), "");
}

}  // namespace
}  // namespace glacier::model
