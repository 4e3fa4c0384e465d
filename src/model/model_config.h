// Hyperparameters of a transformer read from GGUF metadata (ARCH.* keys), validated before any
// weight is touched. The architecture table (arch_table.h) says which keys and tensors each arch uses.
#pragma once
#include <cstdint>
#include <string>

#include "gguf/gguf_fwd.h"
#include "model/arch_table.h"

namespace glacier::model {

enum class RopeScaling { None, Linear, Yarn };
enum class ExpertGating { Softmax, Sigmoid };  // router logits to expert probabilities

struct ModelConfig {
  std::string arch;
  ArchSpec spec{};          // the architecture's row of the table (per-arch behaviour)
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;     // per head, of q/k and v
  int32_t n_ff = 0;
  int32_t n_ctx_train = 0;
  int32_t n_rot = 0;        // rotated dims of a head
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  RopeMode rope_mode = RopeMode::Normal;
  // RoPE scaling as llama.cpp reads it (kernels/rope.h has the formula). YaRN's beta_fast/slow are not
  // GGUF keys: llama.cpp's defaults 32 and 1 apply.
  RopeScaling rope_scaling = RopeScaling::None;
  float rope_freq_scale = 1.0f;    // positions multiplied by this: 1 / rope.scaling.factor
  float rope_attn_factor = 1.0f;   // rope.scaling.attn_factor: cos and sin multiplied by it
  int32_t rope_n_ctx_orig = 0;     // rope.scaling.original_context_length, else context_length (YaRN; Phi-3 long/short)
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  int32_t n_swa = 0;          // sliding attention window (key j visible from i iff i - j < n_swa); 0 = none
  float attn_softcap = 0.0f;  // > 0: attention scores soft-capped (cap * tanh(s / cap)); 0 = none
  float final_softcap = 0.0f; // > 0: output logits soft-capped likewise
  float query_scale = 0.0f;   // q . k is multiplied by this before the softmax
  // Granite's scalars (spec.granite_scales); 0 = not applied, as llama.cpp treats a zero.
  float embedding_scale = 0.0f;  // embedding rows multiplied by it
  float residual_scale = 0.0f;   // each block's output multiplied by it before the residual add
  float logit_scale = 0.0f;      // logits divided by it (multiplied by 1 / logit_scale, as llama.cpp)
  // Mixture of experts (n_expert == 0: a dense FFN of width n_ff).
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;  // experts each token is routed to (top-k)
  int32_t n_ff_expert = 0;    // width of one expert's FFN
  int32_t n_ff_shexp = 0;     // width of the shared expert (0: none)
  ExpertGating expert_gating = ExpertGating::Softmax;
  bool expert_weights_norm = false;  // deepseek2: top-k weights divided by their sum (expert_weights_norm)
  float expert_weights_scale = 1.0f; // deepseek2: top-k weights multiplied by this (the routed scaling factor)
  int32_t n_layer_dense_lead = 0;    // deepseek2: the first layers have a dense FFN of width n_ff
  // Multi-head latent attention (spec.mla). head_dim is the q/k head (nope + rope parts, the rope part is
  // the last n_rot dims), v_head_dim the value head; keys and values come from a latent of kv_lora_rank.
  int32_t q_lora_rank = 0;    // 0: q = attn_q . x; else q = attn_q_b . rmsnorm(attn_q_a . x)
  int32_t kv_lora_rank = 0;
  int32_t v_head_dim = 0;     // value head width (head_dim when not MLA)
  // RoPE's cos/sin factor as deepseek2 applies it (1 / (1 + 0.1 ln(1 / freq_scale)), which YaRN's own factor
  // cancels), and the YaRN mscale (attn_factor (1 + yarn_log_multiplier ln(1 / freq_scale))) that scales
  // q . k twice instead: query_scale = mscale^2 / sqrt(head_dim).
  float mla_rope_attn_factor = 1.0f;

  int32_t q_dim() const { return n_head * head_dim; }
  int32_t kv_dim() const { return n_head_kv * head_dim; }
  int32_t attn_out_dim() const { return n_head * (spec.mla ? v_head_dim : head_dim); }  // attn_output's input
  int32_t nope_dim() const { return head_dim - n_rot; }  // MLA: the part of a q/k head without RoPE
  // Floats the KV cache keeps per position and layer: the latent and the shared rope key under MLA,
  // else every KV head's key and value.
  int32_t kv_cache_row_floats() const { return spec.mla ? kv_lora_rank + n_rot : 2 * kv_dim(); }
  // Whether model layer `layer` has a dense FFN (a MoE model's leading dense layers included).
  bool layer_is_dense(int32_t layer) const { return !is_moe() || layer < n_layer_dense_lead; }
  bool is_moe() const { return n_expert > 0; }
  // Whether model layer `layer` attends through the sliding window.
  bool layer_slides(int32_t layer) const {
    return n_swa > 0 && (spec.sliding_layers == SlidingLayers::All || layer % 2 == 0);
  }
};

// Reads and checks the config; throws InputError naming the file and key (missing key, bad value, an
// unsupported architecture with the list of supported ones), or naming a key or tensor of the file that
// glacier would otherwise ignore (file_coverage.h).
ModelConfig read_model_config(const gguf::File& file);

}  // namespace glacier::model
