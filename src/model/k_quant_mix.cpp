// K-quant mixes as llama-quantize assigns them at the reference llama.cpp commit (c392e509,
// src/llama-quant.cpp, llama_tensor_get_type): one table row per mix, the rules it applies to attn_v, ffn_down
// and attn_output, output.weight always Q6_K, and the overrides for models with 8 experts (attn_k, attn_v,
// attn_output). The rules go by tensor name, so they hold for qwen3moe's names as for llama's.
#include "model/k_quant_mix.h"

#include <cstdio>

#include "util/error.h"

namespace glacier::model {
namespace {

using kernels::WeightType;

// Which layers of a tensor class a rule picks (i = the layer, n = the layer count).
enum class Layers {
  None,          // no layer: the base type everywhere
  All,           // every layer
  FirstTwo,      // i < 2                      (Q3_K_M attn_v: "qs.i_attention_wv < 2")
  FirstFour,     // i < 4                      (Q4_K_S attn_v: "qs.i_attention_wv < 4")
  FirstEighth,   // i < n/8                    (Q4_K_S ffn_down)
  FirstSixteenth,// i < n/16                   (Q3_K_M ffn_down)
  MoreBits,      // use_more_bits(i, n): i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2 (Q4_K_M, Q5_K_M)
};

// A tensor class's type: `hit` on the picked layers, `miss` on the others (WeightType::F32 here means
// the mix's base type).
struct Rule {
  Layers layers = Layers::None;
  WeightType hit = WeightType::F32;
  WeightType miss = WeightType::F32;
};

struct MixRow {
  KQuantMix mix;
  const char* name;
  WeightType base;
  uint32_t file_type;
  Rule attn_v, ffn_down, attn_output;
};

constexpr WeightType kBase = WeightType::F32;

// llama_tensor_get_type, branch by branch, for these mixes (llama arch, no experts, not Falcon):
//   output.weight: Q6_K ("new_type != GGML_TYPE_Q8_0 -> GGML_TYPE_Q6_K"); token_embd.weight: the base type.
//   attn_v:  Q3_K_M  i_attention_wv < 2 ? Q5_K : Q4_K;  Q3_K_L Q5_K;  Q4_K_M/Q5_K_M use_more_bits -> Q6_K;
//            Q4_K_S  i_attention_wv < 4 -> Q5_K.
//   ffn_down: Q3_K_M i_layer < n/16 ? Q5_K : Q4_K (non-Falcon);  Q3_K_L Q5_K;  Q4_K_M/Q5_K_M
//            use_more_bits -> Q6_K;  Q4_K_S i_layer < n/8 -> Q5_K.
//   attn_output: Q3_K_M Q4_K;  Q3_K_L Q5_K.
// Q3_K_S and Q5_K_S single out nothing but output.weight.
constexpr MixRow kMixes[] = {
    {KQuantMix::Q3_K_S, "q3_k_s", WeightType::Q3_K, 11, {}, {}, {}},
    {KQuantMix::Q3_K_M, "q3_k_m", WeightType::Q3_K, 12,
     {Layers::FirstTwo, WeightType::Q5_K, WeightType::Q4_K},
     {Layers::FirstSixteenth, WeightType::Q5_K, WeightType::Q4_K},
     {Layers::All, WeightType::Q4_K, kBase}},
    {KQuantMix::Q3_K_L, "q3_k_l", WeightType::Q3_K, 13,
     {Layers::All, WeightType::Q5_K, kBase}, {Layers::All, WeightType::Q5_K, kBase}, {Layers::All, WeightType::Q5_K, kBase}},
    {KQuantMix::Q4_K_S, "q4_k_s", WeightType::Q4_K, 14,
     {Layers::FirstFour, WeightType::Q5_K, kBase}, {Layers::FirstEighth, WeightType::Q5_K, kBase}, {}},
    {KQuantMix::Q4_K_M, "q4_k_m", WeightType::Q4_K, 15,
     {Layers::MoreBits, WeightType::Q6_K, kBase}, {Layers::MoreBits, WeightType::Q6_K, kBase}, {}},
    {KQuantMix::Q5_K_S, "q5_k_s", WeightType::Q5_K, 16, {}, {}, {}},
    {KQuantMix::Q5_K_M, "q5_k_m", WeightType::Q5_K, 17,
     {Layers::MoreBits, WeightType::Q6_K, kBase}, {Layers::MoreBits, WeightType::Q6_K, kBase}, {}},
};

const MixRow& row_of(KQuantMix mix) {
  for (const MixRow& r : kMixes)
    if (r.mix == mix) return r;
  GLACIER_ASSERT(false, "k_quant_mix: no table row for this mix");
  return kMixes[0];
}

bool picks(Layers layers, int i, int n) {
  switch (layers) {
    case Layers::None: return false;
    case Layers::All: return true;
    case Layers::FirstTwo: return i < 2;
    case Layers::FirstFour: return i < 4;
    case Layers::FirstEighth: return i < n / 8;
    case Layers::FirstSixteenth: return i < n / 16;
    case Layers::MoreBits: return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
  }
  return false;
}

WeightType apply(const Rule& rule, WeightType base, int i, int n) {
  const WeightType t = picks(rule.layers, i, n) ? rule.hit : rule.miss;
  return t == kBase ? base : t;
}

// llama_tensor_get_type matches names by substring: "ffn_down" is ffn_down.weight and ffn_down_exps.weight.
bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// attn_output with exactly 8 experts: Q5_K for these mixes (its list also names Q2_K and IQ types), the base
// type for the others (Q3_K_L, Q5_K_S, Q5_K_M).
bool eight_expert_attn_output_q5_k(KQuantMix mix) {
  return mix == KQuantMix::Q3_K_S || mix == KQuantMix::Q3_K_M || mix == KQuantMix::Q4_K_S || mix == KQuantMix::Q4_K_M;
}

}  // namespace

std::optional<KQuantMix> k_quant_mix_named(const std::string& name) {
  for (const MixRow& r : kMixes)
    if (name == r.name) return r.mix;
  return std::nullopt;
}

const char* k_quant_mix_name(KQuantMix mix) { return mix == KQuantMix::None ? "" : row_of(mix).name; }
kernels::WeightType k_quant_mix_base(KQuantMix mix) { return row_of(mix).base; }
uint32_t k_quant_mix_file_type(KQuantMix mix) { return row_of(mix).file_type; }

kernels::WeightType k_quant_mix_type(KQuantMix mix, const std::string& name, const MixModelShape& shape) {
  const MixRow& row = row_of(mix);
  if (name == "output.weight") return WeightType::Q6_K;
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return row.base;  // token_embd.weight
  GLACIER_ASSERT(layer >= 0 && layer < shape.n_layer, "k_quant_mix_type: layer of '" + name + "' out of range");
  // attn_v counts its tensors in file order (i_attention_wv), which is the layer order in the files this
  // writer makes; ffn_down counts them too without experts and reads the layer from the name with them: the
  // same layer either way, as each layer has one ffn_down tensor (stacked experts are one tensor).
  const bool eight_experts = shape.n_expert == 8;
  WeightType t = row.base;
  if (has(name, "attn_v.weight")) {
    t = apply(row.attn_v, row.base, layer, shape.n_layer);
    // "LLM_TYPE_70B" (llama without 8 experts, 80 layers, grouped K/V heads): attn_v Q3_K/Q4_K become Q5_K.
    if (shape.arch == "llama" && !eight_experts && shape.n_layer == 80 && shape.n_head != shape.n_head_kv &&
        (t == WeightType::Q3_K || t == WeightType::Q4_K))
      t = WeightType::Q5_K;
    if (eight_experts) t = WeightType::Q8_0;  // with 8 experts the attention is small next to them: Q8_0 costs little
  } else if (has(name, "attn_k.weight")) {
    if (eight_experts) t = WeightType::Q8_0;
  } else if (has(name, "ffn_down")) {
    t = apply(row.ffn_down, row.base, layer, shape.n_layer);
  } else if (has(name, "attn_output.weight")) {
    if (eight_experts)
      t = eight_expert_attn_output_q5_k(mix) ? WeightType::Q5_K : row.base;
    else
      t = apply(row.attn_output, row.base, layer, shape.n_layer);
  }
  return t;
}

}  // namespace glacier::model
