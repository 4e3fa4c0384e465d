// The architecture table: what each supported `general.architecture` needs, in one place, so that
// adding an architecture is a table row rather than `if`s scattered over the compute code.
#pragma once
#include <string>
#include <vector>

namespace glacier::model {

enum class RopeMode { Normal, NeoX };  // Normal rotates adjacent pairs, NeoX the two halves of a head

// Where the logits' projection comes from.
enum class OutputTensor {
  OptionalTied,  // output.weight, or the token embedding when it is absent
  Required,      // output.weight must be present
  AlwaysTied,    // the token embedding is always reused (gemma)
};

enum class QkvLayout { Separate, Fused };     // Fused: one attn_qkv whose output rows are Q | K | V
enum class FfnLayout { Separate, FusedGateUp };  // FusedGateUp: ffn_up's output rows are gate | up
enum class FfnActivation { Silu, GeluTanh };  // applied to the gate before it multiplies up
enum class MoeUse { Never, IfExpertCount, Always };
enum class SlidingLayers { All, Even };  // which layers the sliding window applies to (gemma2: 0, 2, 4, ...)
// The scale of q . k: 1 / sqrt(head_dim), or gemma2's, which the file does not record and llama.cpp
// picks by the model's size (block_count): 1 / sqrt(n_embd / n_head) for the 27B (46 layers), else the head's.
enum class QueryScale { HeadDim, Gemma2BySize };

// One row of the table. The defaults describe plain llama; a row states only where its arch differs.
struct ArchSpec {
  const char* name = "";
  RopeMode rope_mode = RopeMode::Normal;
  OutputTensor output = OutputTensor::OptionalTied;
  QkvLayout qkv = QkvLayout::Separate;
  bool qkv_bias = false;         // attn_q/k/v.bias added after the projections
  bool qk_norm = false;          // per-head RMSNorm of q and k (weights [head_dim]) before RoPE
  FfnLayout ffn = FfnLayout::Separate;
  FfnActivation ffn_act = FfnActivation::Silu;
  bool scale_embedding = false;  // token embedding rows multiplied by sqrt(n_embd)
  MoeUse moe = MoeUse::Never;
  bool renormalize_expert_weights = false;  // top-k softmax probabilities divided by their sum
  bool shared_expert = false;    // an always-on expert gated by sigmoid(ffn_gate_inp_shexp . x)
  const char* expert_ff_key = nullptr;       // ARCH.<key> of one expert's width; nullptr: feed_forward_length
  const char* sliding_window_key = nullptr;  // ARCH.<key> of the attention window; nullptr: none
  int32_t default_sliding_window = 0;        // the window when the key is absent (0: none)
  SlidingLayers sliding_layers = SlidingLayers::All;
  bool post_norms = false;       // post_attention_norm / post_ffw_norm: RMSNorm of each block's output before the residual add
  // ARCH.attn_logit_softcapping and ARCH.final_logit_softcapping (defaults 50 and 30 when absent):
  // attention scores and the output logits become cap * tanh(x / cap).
  bool logit_softcapping = false;
  QueryScale query_scale = QueryScale::HeadDim;
  bool rope_freqs = false;       // may carry rope_freqs.weight: per-pair divisors of the rotary frequencies (Llama 3)
  // May carry rope_factors_long.weight and rope_factors_short.weight (Phi-3 LongRoPE): per-pair divisors,
  // the long ones when the sequence context exceeds the original context, as llama.cpp chooses them.
  bool rope_factors_long_short = false;
  // DeepSeek V2/V3 multi-head latent attention (model_config.h's MLA fields): q via attn_q or the low-rank
  // attn_q_a/q_a_norm/q_b, keys and values from a compressed latent (attn_kv_a_mqa, kv_a_norm, kv_b) that
  // the KV cache stores instead of per-head keys and values; leading dense layers, then routed experts
  // with an ungated shared expert, gating and weight keys read from the file (expert_gating_func, ...).
  bool mla = false;
  // IBM Granite's four scalars (ARCH.embedding_scale, residual_scale, attention.scale, logit_scale, each
  // required, 0 meaning none as in llama.cpp): embedding rows times the first, each block's output times
  // the second before the residual add, q . k times the third instead of 1 / sqrt(head_dim), logits
  // divided by the fourth.
  bool granite_scales = false;
};

const std::vector<ArchSpec>& supported_archs();
// The spec for `arch`; throws InputError naming the file, the arch and the supported list.
const ArchSpec& find_arch(const std::string& path, const std::string& arch);

}  // namespace glacier::model
