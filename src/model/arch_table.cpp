// Rows of the architecture table. Only what the compute code implements is listed: a model of
// another architecture is refused with the list below instead of computing something wrong.
// MoE gating choices are hard-wired per architecture (GGUF files carry no key for them).
#include "model/arch_table.h"

#include "util/error.h"

namespace glacier::model {

const std::vector<ArchSpec>& supported_archs() {
  using R = RopeMode;
  using O = OutputTensor;
  static const std::vector<ArchSpec> table = {
      // llama, and Mixtral-style MoE (arch llama + expert_count): softmax, top-k, renormalized.
      {.name = "llama", .moe = MoeUse::IfExpertCount, .renormalize_expert_weights = true, .rope_freqs = true},
      // IBM Granite 3.x: llama's blocks with four scalars from the file (arch_table.h, granite_scales).
      {.name = "granite", .granite_scales = true},
      // Granite 3.x MoE: the same scalars over Mixtral-style experts (softmax, top-k, renormalized).
      {.name = "granitemoe", .moe = MoeUse::Always, .renormalize_expert_weights = true, .granite_scales = true},
      {.name = "qwen2", .rope_mode = R::NeoX, .qkv_bias = true},
      // Qwen1.5/2-MoE: the top-k probabilities are used as they are, plus the gated shared expert.
      {.name = "qwen2moe", .rope_mode = R::NeoX, .output = O::Required, .qkv_bias = true, .moe = MoeUse::Always,
       .shared_expert = true, .expert_ff_key = "expert_feed_forward_length"},
      {.name = "gemma", .rope_mode = R::NeoX, .output = O::AlwaysTied, .ffn_act = FfnActivation::GeluTanh,
       .scale_embedding = true},
      // Gemma 2: sliding-window attention (4096 unless the key says otherwise) on even layers, global on
      // odd ones; soft-capped attention scores and logits; norms after attention and FFN as well.
      {.name = "gemma2", .rope_mode = R::NeoX, .output = O::AlwaysTied, .ffn_act = FfnActivation::GeluTanh,
       .scale_embedding = true, .sliding_window_key = "attention.sliding_window", .default_sliding_window = 4096,
       .sliding_layers = SlidingLayers::Even, .post_norms = true, .logit_softcapping = true,
       .query_scale = QueryScale::Gemma2BySize},
      {.name = "phi3", .rope_mode = R::NeoX, .output = O::Required, .qkv = QkvLayout::Fused,
       .ffn = FfnLayout::FusedGateUp, .sliding_window_key = "attention.sliding_window", .rope_factors_long_short = true},
      {.name = "qwen3", .rope_mode = R::NeoX, .qk_norm = true},
      {.name = "qwen3moe", .rope_mode = R::NeoX, .output = O::Required, .qk_norm = true, .moe = MoeUse::Always,
       .renormalize_expert_weights = true, .expert_ff_key = "expert_feed_forward_length"},
      // DeepSeek V2/V3: latent attention, adjacent-pair RoPE on the rope part of q and k only; expert gating
      // (softmax or sigmoid), renormalization and scale come from ARCH.expert_* keys.
      {.name = "deepseek2", .output = O::Required, .moe = MoeUse::Always, .shared_expert = true,
       .expert_ff_key = "expert_feed_forward_length", .mla = true},
  };
  return table;
}

const ArchSpec& find_arch(const std::string& path, const std::string& arch) {
  std::string names;
  for (const ArchSpec& s : supported_archs()) {
    if (arch == s.name) return s;
    names += (names.empty() ? "" : ", ") + std::string(s.name);
  }
  throw InputError(path + ": key 'general.architecture': expected one of the supported architectures (" + names +
                   "), found '" + arch + "'");
}

}  // namespace glacier::model
