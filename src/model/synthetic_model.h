// Writes llama-, granite-, gemma2-, deepseek2- or qwen3moe-architecture GGUF models with seeded random weights (glacier_mkmodel): a whole job can
// run on a machine with no downloads, and speed work gets real-sized models. Streams tensor by tensor.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "model/k_quant_mix.h"

namespace glacier::model {

struct SyntheticModelSpec {
  std::string name = "glacier-synthetic";
  // "llama", "granite" (llama's tensors and four scale keys), "gemma2" (tied output head, post-attention and post-FFN norms, soft-capping and
  // sliding-window keys below), "deepseek2" (the `deepseek` shapes below) or "qwen3moe" (the `qwen3moe` shapes below).
  std::string arch = "llama";
  int32_t sliding_window = 0;        // gemma2: ARCH.attention.sliding_window; 0 = key absent (4096 applies)
  float attn_softcap = 50.0f;        // gemma2: ARCH.attn_logit_softcapping
  float final_softcap = 30.0f;       // gemma2: ARCH.final_logit_softcapping
  // granite: llama's tensors plus its four scalar keys (defaults are Granite 3.0 2B's).
  struct Granite {
    float embedding_scale = 12.0f;
    float residual_scale = 0.22f;
    float attention_scale = 0.015625f;
    float logit_scale = 8.0f;
  } granite;
  // deepseek2 (latent attention, leading dense layers then routed + shared experts); n_head_kv is n_head.
  struct DeepSeek {
    int32_t q_lora_rank = 32;     // 0: plain attn_q (llama.cpp then needs 27 layers)
    int32_t kv_lora_rank = 32;
    int32_t rope_dim = 16;        // rotated part of a q/k head
    int32_t nope_dim = 32;        // the rest of a q/k head
    int32_t v_head_dim = 32;
    int32_t n_expert = 4;
    int32_t n_expert_used = 2;
    int32_t n_expert_shared = 1;
    int32_t n_ff_expert = 64;
    int32_t leading_dense = 1;
    bool sigmoid_gating = false;  // expert_gating_func 2 (V3) instead of 1 (softmax)
    bool weights_norm = false;    // expert_weights_norm
    float weights_scale = 1.0f;   // expert_weights_scale
    bool exp_probs_b = false;     // per-layer selection bias tensors (V3)
    float yarn_log_multiplier = 0.0f;
  } deepseek;
  // qwen3moe (Qwen3-MoE: llama attention without biases plus per-head q/k RMS norms, NeoX RoPE, every layer routed
  // experts, softmax top-k renormalized, no shared expert). n_ff is written as feed_forward_length only.
  struct Qwen3Moe {
    int32_t head_dim = 0;  // attention.key_length and value_length; 0: n_embd / n_head
    int32_t n_expert = 4;
    int32_t n_expert_used = 2;
    int32_t n_ff_expert = 64;
  } qwen3moe;
  int32_t n_vocab = 0;  // 0: the built-in vocabulary's size, or the --vocab-from file's token count
  int32_t n_embd = 64;
  int32_t n_layer = 2;
  int32_t n_head = 4;
  int32_t n_head_kv = 2;
  int32_t n_ff = 128;
  int32_t n_ctx = 2048;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  // Llama 3's rope_freqs.weight: divisors rising linearly from 1 (first pair) to 8 (last pair).
  bool rope_freqs = false;
  // llama.rope.scaling.type and .factor: "" (no keys), "linear" or "yarn"; yarn also writes
  // rope.scaling.original_context_length = n_ctx.
  std::string rope_scaling_type;
  float rope_scaling_factor = 1.0f;
  kernels::WeightType weight_type = kernels::WeightType::F32;  // 2-D weights; norms stay f32
  // A llama-quantize K-quant mix: per-tensor types (k_quant_mix.h) instead of weight_type everywhere.
  KQuantMix k_quant_mix = KQuantMix::None;
  uint64_t seed = 1;
  std::string vocab_from;  // a GGUF file whose tokenizer.* keys are copied; empty = built-in vocabulary
  int threads = 0;         // 0 = all hardware threads; the bytes never depend on it
};

// "tiny", "llama-1b", "llama-7b", "qwen3moe-1.4b" (sets arch qwen3moe); InputError listing them for any other name.
SyntheticModelSpec synthetic_preset(const std::string& preset);
// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "iq4_xs", "q2_k" .. "q6_k" (one type
// for every 2-D weight); InputError listing them and the mixes for any other name.
kernels::WeightType synthetic_weight_type(const std::string& name);
// --type: one of those types, or a K-quant mix name ("q3_k_s" .. "q5_k_m"); sets weight_type (a mix's
// base type) and k_quant_mix.
void set_synthetic_type(SyntheticModelSpec& spec, const std::string& name);

struct SyntheticModelSummary {
  int32_t n_vocab = 0;
  uint64_t n_params = 0;
  uint64_t file_bytes = 0;
};

// Called after each tensor: its name, data bytes written so far and in total.
using SyntheticProgress = std::function<void(const std::string& tensor, uint64_t done, uint64_t total)>;

// Validates the spec (InputError naming the option, what was expected and what was found), then
// writes the model to `path` via a temporary file beside it, so a failed run leaves no partial model.
// The bytes depend only on the spec (not on `threads`).
SyntheticModelSummary write_synthetic_model(const SyntheticModelSpec& spec, const std::string& path,
                                            const SyntheticProgress& progress = {});

// Fills out[0..n) with standard normal values from a std::mt19937_64 seeded with `stream_seed`,
// through a Box-Muller transform of its own, so values do not depend on the standard library's
// distribution code. Each weight row is one such stream.
void fill_standard_normal(uint64_t stream_seed, float* out, int64_t n);

}  // namespace glacier::model
