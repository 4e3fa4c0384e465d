// Reads ModelConfig from GGUF metadata and checks the values are usable (positive, divisible,
// consistent with the vocabulary), so compute never sees a nonsensical shape.
#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "gguf/gguf_file.h"
#include "model/arch_table.h"
#include "model/file_coverage.h"
#include "util/error.h"

namespace glacier::model {
namespace {

int32_t positive_key(const gguf::File& f, const std::string& key, int64_t max_value = (1LL << 30)) {
  uint64_t v = f.get_uint(key);
  if (v == 0 || static_cast<int64_t>(v) > max_value)
    throw InputError(f.path() + ": key '" + key + "': expected an integer in 1.." + std::to_string(max_value) +
                     ", found " + std::to_string(v));
  return static_cast<int32_t>(v);
}

// Expert counts and widths. A MoE architecture must name its experts; llama has them only when
// expert_count is present (Mixtral).
void read_experts(const gguf::File& f, const std::string& p, const ArchSpec& spec, ModelConfig& c) {
  const bool has_count = f.find_uint(p + "expert_count").has_value() && f.get_uint(p + "expert_count") > 0;
  if (spec.moe == MoeUse::Never || (spec.moe == MoeUse::IfExpertCount && !has_count)) return;
  c.n_expert = positive_key(f, p + "expert_count", 4096);
  c.n_expert_used = positive_key(f, p + "expert_used_count", 4096);
  if (c.n_expert_used > c.n_expert)
    throw InputError(f.path() + ": key '" + p + "expert_used_count': expected at most expert_count (" +
                     std::to_string(c.n_expert) + "), found " + std::to_string(c.n_expert_used));
  c.n_ff_expert = spec.expert_ff_key ? positive_key(f, p + spec.expert_ff_key) : c.n_ff;
  if (spec.shared_expert && !spec.mla) c.n_ff_shexp = positive_key(f, p + "expert_shared_feed_forward_length");
}

// deepseek2's expert keys as llama.cpp reads them: shared experts are expert_shared_count experts' width
// fused into one FFN, the weights scale is required, renormalization optional (off), and a gating
// function of 0 (absent, V2 and V2.5 files) means softmax.
void read_deepseek2_experts(const gguf::File& f, const std::string& p, ModelConfig& c) {
  const int32_t n_shared = positive_key(f, p + "expert_shared_count", 4096);
  c.n_ff_shexp = c.n_ff_expert * n_shared;
  c.n_layer_dense_lead = static_cast<int32_t>(f.get_uint(p + "leading_dense_block_count"));
  if (c.n_layer_dense_lead > c.n_layer)
    throw InputError(f.path() + ": key '" + p + "leading_dense_block_count': expected at most block_count (" +
                     std::to_string(c.n_layer) + "), found " + std::to_string(c.n_layer_dense_lead));
  const std::string scale_key = p + "expert_weights_scale";
  c.expert_weights_scale = static_cast<float>(f.get_float(scale_key));
  if (!(c.expert_weights_scale > 0.0f && c.expert_weights_scale < 1e6f))
    throw InputError(f.path() + ": key '" + scale_key + "': expected a value in (0, 1e6), found " +
                     std::to_string(c.expert_weights_scale));
  if (const gguf::Value* v = f.find(p + "expert_weights_norm")) {
    const bool* b = std::get_if<bool>(&v->data);
    if (!b)
      throw InputError(f.path() + ": key '" + p + "expert_weights_norm': expected a bool, found " +
                       gguf::value_type_name(v->type));
    c.expert_weights_norm = *b;
  }
  const std::string gating_key = p + "expert_gating_func";
  const uint64_t gating = f.find_uint(gating_key) ? f.get_uint(gating_key) : 0;
  if (gating == 0 || gating == 1) {
    c.expert_gating = ExpertGating::Softmax;
  } else if (gating == 2) {
    c.expert_gating = ExpertGating::Sigmoid;
  } else {
    throw InputError(f.path() + ": key '" + gating_key + "': expected 1 (softmax) or 2 (sigmoid), found " +
                     std::to_string(gating));
  }
}

// Multi-head latent attention shapes. llama.cpp takes the q projection's form from the layer count (27
// layers, DeepSeek-V2-Lite, has a plain attn_q and no q_lora_rank; every other count the low-rank
// attn_q_a/attn_q_b): a file that disagrees would load differently there, so it is refused here.
void read_mla(const gguf::File& f, const std::string& p, ModelConfig& c) {
  const std::string q_key = p + "attention.q_lora_rank";
  const bool lite = c.n_layer == 27;
  const bool has_q_lora = f.find_uint(q_key).has_value() && f.get_uint(q_key) > 0;
  if (has_q_lora == lite)
    throw InputError(f.path() + ": key '" + q_key + "': expected it " + (lite ? "absent" : "set") + " for a " +
                     std::to_string(c.n_layer) + "-layer deepseek2 model (llama.cpp, the reference, uses a plain "
                     "attn_q exactly when block_count is 27, DeepSeek-V2-Lite, and the low-rank attn_q_a/attn_q_b "
                     "otherwise), found it " + (has_q_lora ? "set" : "absent"));
  if (has_q_lora) c.q_lora_rank = positive_key(f, q_key);
  c.kv_lora_rank = positive_key(f, p + "attention.kv_lora_rank");
  c.v_head_dim = positive_key(f, p + "attention.value_length", 4096);
  if (c.n_head_kv != c.n_head)
    throw InputError(f.path() + ": key '" + p + "attention.head_count_kv': expected head_count (" +
                     std::to_string(c.n_head) + ") for latent attention, found " + std::to_string(c.n_head_kv));
  if (c.n_rot >= c.head_dim)
    throw InputError(f.path() + ": key '" + p + "rope.dimension_count': expected less than key_length " +
                     std::to_string(c.head_dim) + " (the rest of a head has no RoPE), found " + std::to_string(c.n_rot));
  // Required by llama.cpp for deepseek2; 0 leaves the attention scale as it is.
  const std::string mul_key = p + "rope.scaling.yarn_log_multiplier";
  const double log_mul = f.get_float(mul_key);
  if (!std::isfinite(log_mul) || log_mul < 0.0 || log_mul > 100.0)
    throw InputError(f.path() + ": key '" + mul_key + "': expected a value in [0, 100], found " + std::to_string(log_mul));
  const float freq_scale = c.rope_scaling == RopeScaling::None ? 1.0f : c.rope_freq_scale;
  const float mscale = c.rope_attn_factor * (1.0f + static_cast<float>(log_mul) * std::log(1.0f / freq_scale));
  c.query_scale = mscale * mscale / std::sqrt(static_cast<float>(c.head_dim));
  c.mla_rope_attn_factor = 1.0f / (1.0f + 0.1f * std::log(1.0f / freq_scale));
}

// RoPE scaling keys as llama.cpp reads them: the type defaults to linear, a factor of 0 means none,
// rope.scale_linear is the factor's older name, and attn_factor applies whatever the type.
void read_rope_scaling(const gguf::File& f, const std::string& p, ModelConfig& c) {
  const std::string type_key = p + "rope.scaling.type";
  const std::string type = f.find(type_key) ? f.get_string(type_key) : "linear";
  std::string factor_key = p + "rope.scaling.factor";
  if (!f.find(factor_key) && f.find(p + "rope.scale_linear")) factor_key = p + "rope.scale_linear";
  const double factor = f.find(factor_key) ? f.get_float(factor_key) : 0.0;
  if (!std::isfinite(factor) || factor < 0.0 || (factor > 0.0 && factor < 1e-6) || factor > 1e6)
    throw InputError(f.path() + ": key '" + factor_key + "': expected 0 (no scaling) or a factor in [1e-6, 1e6], found " +
                     std::to_string(factor));
  c.rope_freq_scale = factor == 0.0 ? 1.0f : static_cast<float>(1.0 / factor);
  if (type == "none") {
    c.rope_scaling = RopeScaling::None;
    c.rope_freq_scale = 1.0f;  // llama.cpp: never scale when the type is none
  } else if (type == "linear") {
    c.rope_scaling = c.rope_freq_scale == 1.0f ? RopeScaling::None : RopeScaling::Linear;
  } else if (type == "yarn") {
    c.rope_scaling = RopeScaling::Yarn;
  } else {
    throw InputError(f.path() + ": key '" + type_key + "': expected a rope scaling type glacier implements (none, " +
                     "linear, yarn), found '" + type + "'");
  }
  const std::string attn_key = p + "rope.scaling.attn_factor";
  if (f.find(attn_key)) c.rope_attn_factor = static_cast<float>(f.get_float(attn_key));
  if (!(c.rope_attn_factor > 0.0f && c.rope_attn_factor < 1e6f))
    throw InputError(f.path() + ": key '" + attn_key + "': expected a value in (0, 1e6), found " +
                     std::to_string(c.rope_attn_factor));
  const std::string orig_key = p + "rope.scaling.original_context_length";
  c.rope_n_ctx_orig = f.find(orig_key) ? positive_key(f, orig_key) : c.n_ctx_train;
}

// A soft-cap key's value, or `fallback` when absent; a cap must be a positive finite number.
float softcap_key(const gguf::File& f, const std::string& key, float fallback) {
  const auto v = f.find_float(key);
  const float cap = v ? static_cast<float>(*v) : fallback;
  if (!(cap > 0.0f && cap < 1e30f))
    throw InputError(f.path() + ": key '" + key + "': expected a positive soft-cap, found " + std::to_string(cap));
  return cap;
}

void read_softcaps_and_query_scale(const gguf::File& f, const std::string& p, ModelConfig& c) {
  if (c.spec.logit_softcapping) {
    c.attn_softcap = softcap_key(f, p + "attn_logit_softcapping", 50.0f);
    c.final_softcap = softcap_key(f, p + "final_logit_softcapping", 30.0f);
  }
  float denom = static_cast<float>(c.head_dim);
  if (c.spec.query_scale == QueryScale::Gemma2BySize) {
    // llama.cpp (reference commit) knows 26-, 42- and 46-layer Gemma 2 and stops on any other: the
    // query scalar is not in the file, so guessing could compute the wrong attention.
    if (c.n_layer == 46) {
      denom = static_cast<float>(c.n_embd / c.n_head);
    } else if (c.n_layer != 26 && c.n_layer != 42) {
      throw InputError(f.path() + ": key '" + p + "block_count': expected 26, 42 or 46 layers (Gemma 2 2B, 9B or "
                       "27B, whose attention scale is known; the file does not record it), found " +
                       std::to_string(c.n_layer));
    }
  }
  c.query_scale = 1.0f / std::sqrt(denom);
}

// Granite's four scalars. llama.cpp requires each key and skips a scale of 0; a negative or non-finite
// one has no meaning, so it is refused.
void read_granite_scales(const gguf::File& f, const std::string& p, ModelConfig& c) {
  auto scale = [&](const std::string& suffix) {
    const std::string key = p + suffix;
    const double v = f.get_float(key);
    if (!std::isfinite(v) || v < 0.0 || v > 1e6)
      throw InputError(f.path() + ": key '" + key + "': expected a scale in [0, 1e6] (0: none), found " + std::to_string(v));
    return static_cast<float>(v);
  };
  c.embedding_scale = scale("embedding_scale");
  c.residual_scale = scale("residual_scale");
  c.logit_scale = scale("logit_scale");
  if (const float attention_scale = scale("attention.scale"); attention_scale != 0.0f) c.query_scale = attention_scale;
}

}  // namespace

ModelConfig read_model_config(const gguf::File& f) {
  ModelConfig c;
  c.arch = f.get_string("general.architecture");
  const ArchSpec& spec = find_arch(f.path(), c.arch);
  const std::string p = c.arch + ".";
  c.n_embd = positive_key(f, p + "embedding_length");
  c.n_layer = positive_key(f, p + "block_count", 4096);
  c.n_head = positive_key(f, p + "attention.head_count", 4096);
  c.n_head_kv = f.find_uint(p + "attention.head_count_kv") ? positive_key(f, p + "attention.head_count_kv", 4096)
                                                             : c.n_head;
  c.n_ff = positive_key(f, p + "feed_forward_length");
  c.n_ctx_train = f.find_uint(p + "context_length") ? positive_key(f, p + "context_length") : 2048;
  if (f.find_uint(p + "attention.key_length")) {
    c.head_dim = positive_key(f, p + "attention.key_length", 4096);
  } else {
    if (c.n_embd % c.n_head != 0)
      throw InputError(f.path() + ": key '" + p + "embedding_length': expected a multiple of head_count (" +
                       std::to_string(c.n_head) + "), found " + std::to_string(c.n_embd));
    c.head_dim = c.n_embd / c.n_head;
  }
  if (c.n_head % c.n_head_kv != 0)
    throw InputError(f.path() + ": key '" + p + "attention.head_count_kv': expected a divisor of head_count (" +
                     std::to_string(c.n_head) + "), found " + std::to_string(c.n_head_kv));
  c.n_rot = f.find_uint(p + "rope.dimension_count") ? positive_key(f, p + "rope.dimension_count", 4096) : c.head_dim;
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    throw InputError(f.path() + ": key '" + p + "rope.dimension_count': expected an even number <= head dim " +
                     std::to_string(c.head_dim) + ", found " + std::to_string(c.n_rot));
  if (auto eps = f.find_float(p + "attention.layer_norm_rms_epsilon")) c.rms_eps = static_cast<float>(*eps);
  if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f))
    throw InputError(f.path() + ": key '" + p + "attention.layer_norm_rms_epsilon': expected a value in (0, 1), found " +
                     std::to_string(c.rms_eps));
  if (auto base = f.find_float(p + "rope.freq_base")) c.rope_base = static_cast<float>(*base);
  if (!(c.rope_base > 1.0f))
    throw InputError(f.path() + ": key '" + p + "rope.freq_base': expected a value > 1, found " +
                     std::to_string(c.rope_base));
  c.rope_mode = spec.rope_mode;
  c.spec = spec;
  c.v_head_dim = c.head_dim;
  if (auto vlen = f.find_uint(p + "attention.value_length"); !spec.mla && vlen && *vlen != static_cast<uint64_t>(c.head_dim))
    throw InputError(f.path() + ": key '" + p + "attention.value_length': expected the key length " +
                     std::to_string(c.head_dim) + " (distinct value widths are not supported), found " +
                     std::to_string(*vlen));
  if (spec.sliding_window_key) {
    c.n_swa = spec.default_sliding_window;
    if (f.find_uint(p + spec.sliding_window_key))
      c.n_swa = static_cast<int32_t>(std::min<uint64_t>(f.get_uint(p + spec.sliding_window_key), 1u << 30));
  }
  read_softcaps_and_query_scale(f, p, c);
  if (spec.granite_scales) read_granite_scales(f, p, c);
  read_experts(f, p, spec, c);
  read_rope_scaling(f, p, c);
  if (spec.mla) {
    read_deepseek2_experts(f, p, c);
    read_mla(f, p, c);
  }
  // The vocabulary size is the token list's length; the embedding's shape is checked against it on load.
  const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != gguf::ValueType::ARRAY)
    throw InputError(f.path() + ": key 'tokenizer.ggml.tokens': expected an array of strings, found " +
                     (tokens ? gguf::value_type_name(tokens->type) : "nothing (key missing)"));
  c.n_vocab = static_cast<int32_t>(std::get<gguf::Array>(tokens->data).items.size());
  if (c.n_vocab <= 0) throw InputError(f.path() + ": key 'tokenizer.ggml.tokens': expected a non-empty vocabulary, found 0 tokens");
  check_keys_understood(f, c);
  check_tensors_used(f, c);
  return c;
}

}  // namespace glacier::model
