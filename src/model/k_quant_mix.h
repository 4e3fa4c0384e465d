// The K-quant mixes of llama-quantize (Q3_K_S .. Q5_K_M): which weight type each tensor of a llama (or qwen3moe)
// model gets, and the general.file_type code of the mix, so glacier_mkmodel writes the files users download.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/matmul.h"

namespace glacier::model {

enum class KQuantMix { None, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M };

// "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m"; nullopt for any other name.
std::optional<KQuantMix> k_quant_mix_named(const std::string& name);
const char* k_quant_mix_name(KQuantMix mix);  // "" for None
// The mix's type for the tensors it does not single out (token_embd, attn_q/k, ffn_gate/up, ...).
kernels::WeightType k_quant_mix_base(KQuantMix mix);
// llama_ftype of the mix (LLAMA_FTYPE_MOSTLY_Q3_K_S = 11 .. Q5_K_M = 17).
uint32_t k_quant_mix_file_type(KQuantMix mix);

// The shape facts the choice depends on.
struct MixModelShape {
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t n_expert = 0;       // routed experts a layer (0: none); llama-quantize has rules for exactly 8
  std::string arch = "llama";  // general.architecture: llama.cpp's size class "70B" exists for llama only
};

// Type of the 2-D or stacked 3-D tensor `name` (GGUF names: "output.weight", "blk.N.attn_v.weight",
// "blk.N.ffn_down_exps.weight", ...) in the mix, for a model of `shape`.
kernels::WeightType k_quant_mix_type(KQuantMix mix, const std::string& name, const MixModelShape& shape);

}  // namespace glacier::model
