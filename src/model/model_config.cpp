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
  if (spec.shared_expert) c.n_ff_shexp = positive_key(f, p + "expert_shared_feed_forward_length");
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
  if (auto vlen = f.find_uint(p + "attention.value_length"); vlen && *vlen != static_cast<uint64_t>(c.head_dim))
    throw InputError(f.path() + ": key '" + p + "attention.value_length': expected the key length " +
                     std::to_string(c.head_dim) + " (distinct value widths are not supported), found " +
                     std::to_string(*vlen));
  if (spec.sliding_window_key) {
    c.n_swa = spec.default_sliding_window;
    if (f.find_uint(p + spec.sliding_window_key))
      c.n_swa = static_cast<int32_t>(std::min<uint64_t>(f.get_uint(p + spec.sliding_window_key), 1u << 30));
  }
  read_softcaps_and_query_scale(f, p, c);
  read_experts(f, p, spec, c);
  read_rope_scaling(f, p, c);
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
