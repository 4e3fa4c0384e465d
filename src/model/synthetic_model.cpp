// Synthetic llama, gemma2, deepseek2 and qwen3moe models: spec checks, metadata (ARCH.* and tokenizer.* keys), and weights drawn row by
// row from seeded streams, encoded and streamed to disk in chunks so memory stays far below model size.
#include "model/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <thread>

#include "gguf/gguf_file.h"
#include "gguf/gguf_stream_writer.h"
#include "kernels/quantize.h"
#include "model/synthetic_vocab.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace glacier::model {
namespace {

constexpr int32_t kTinyMinVocab = 512;
constexpr size_t kChunkBytes = size_t{32} << 20;  // encoded bytes generated between two writes
// Gains keep activations finite through every layer: each matrix maps unit-rms inputs to unit-std
// outputs, so the residual stream grows only like sqrt(layers).
constexpr float kMatrixGain = 1.0f;
constexpr float kEmbeddingStd = 0.5f;
constexpr float kNormSpread = 0.05f;  // norm weights 1 + 0.05 N(0,1): a missing norm multiply shows

[[noreturn]] void bad_option(const std::string& option, const std::string& expected, const std::string& found) {
  throw InputError("synthetic model option --" + option + ": expected " + expected + ", found " + found);
}

// splitmix64's finalizer: spreads (seed, tensor, row) into well-separated generator seeds.
uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// FNV-1a: a tensor's streams depend on its name, not on its position in the file.
uint64_t name_hash(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

gguf::TensorType gguf_type(kernels::WeightType t) {
  switch (t) {
    case kernels::WeightType::F32: return gguf::TensorType::F32;
    case kernels::WeightType::F16: return gguf::TensorType::F16;
    case kernels::WeightType::BF16: return gguf::TensorType::BF16;
    case kernels::WeightType::Q8_0: return gguf::TensorType::Q8_0;
    case kernels::WeightType::Q4_0: return gguf::TensorType::Q4_0;
    case kernels::WeightType::Q4_K: return gguf::TensorType::Q4_K;
    case kernels::WeightType::Q5_K: return gguf::TensorType::Q5_K;
    case kernels::WeightType::Q6_K: return gguf::TensorType::Q6_K;
    case kernels::WeightType::Q4_1: return gguf::TensorType::Q4_1;
    case kernels::WeightType::Q5_0: return gguf::TensorType::Q5_0;
    case kernels::WeightType::Q5_1: return gguf::TensorType::Q5_1;
    case kernels::WeightType::IQ4_NL: return gguf::TensorType::IQ4_NL;
    case kernels::WeightType::IQ4_XS: return gguf::TensorType::IQ4_XS;
    case kernels::WeightType::Q2_K: return gguf::TensorType::Q2_K;
    case kernels::WeightType::Q3_K: return gguf::TensorType::Q3_K;
  }
  GLACIER_ASSERT(false, "unknown weight type");
  return gguf::TensorType::F32;
}

const char* lower_type_name(kernels::WeightType t) {
  switch (t) {
    case kernels::WeightType::F32: return "f32";
    case kernels::WeightType::F16: return "f16";
    case kernels::WeightType::BF16: return "bf16";
    case kernels::WeightType::Q8_0: return "q8_0";
    case kernels::WeightType::Q4_0: return "q4_0";
    case kernels::WeightType::Q4_K: return "q4_k";
    case kernels::WeightType::Q5_K: return "q5_k";
    case kernels::WeightType::Q6_K: return "q6_k";
    case kernels::WeightType::Q4_1: return "q4_1";
    case kernels::WeightType::Q5_0: return "q5_0";
    case kernels::WeightType::Q5_1: return "q5_1";
    case kernels::WeightType::IQ4_NL: return "iq4_nl";
    case kernels::WeightType::IQ4_XS: return "iq4_xs";
    case kernels::WeightType::Q2_K: return "q2_k";
    case kernels::WeightType::Q3_K: return "q3_k";
  }
  GLACIER_ASSERT(false, "unknown weight type");
  return "";
}

// The types glacier_mkmodel writes.
constexpr kernels::WeightType kWritableTypes[] = {
    kernels::WeightType::F32,  kernels::WeightType::F16,  kernels::WeightType::BF16,
    kernels::WeightType::Q8_0, kernels::WeightType::Q4_0, kernels::WeightType::Q4_1,
    kernels::WeightType::Q5_0, kernels::WeightType::Q5_1, kernels::WeightType::IQ4_NL,
    kernels::WeightType::IQ4_XS, kernels::WeightType::Q2_K, kernels::WeightType::Q3_K,
    kernels::WeightType::Q4_K, kernels::WeightType::Q5_K, kernels::WeightType::Q6_K};
constexpr const char* kTypeChoices =
    "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs, q2_k, q3_k, q4_k, q5_k, q6_k or a K-quant mix "
    "(q3_k_s, q3_k_m, q3_k_l, q4_k_s, q4_k_m, q5_k_s, q5_k_m)";

// Elements per block of a quantized type (matrix widths must be multiples of it; the file then records
// the quantization version), 1 for the plain types.
int block_size(kernels::WeightType t) {
  switch (t) {
    case kernels::WeightType::F32:
    case kernels::WeightType::F16:
    case kernels::WeightType::BF16: return 1;
    case kernels::WeightType::Q2_K:
    case kernels::WeightType::Q3_K:
    case kernels::WeightType::Q4_K:
    case kernels::WeightType::Q5_K:
    case kernels::WeightType::Q6_K:
    case kernels::WeightType::IQ4_XS: return kernels::kQK_K;
    default: return kernels::kQK8_0;
  }
}
bool is_block_type(kernels::WeightType t) { return block_size(t) > 1; }

// general.file_type: llama.cpp's "mostly TYPE" codes.
uint32_t file_type_code(kernels::WeightType t) {
  switch (t) {
    case kernels::WeightType::F32: return 0;
    case kernels::WeightType::F16: return 1;
    case kernels::WeightType::Q4_0: return 2;
    case kernels::WeightType::Q8_0: return 7;
    case kernels::WeightType::BF16: return 32;
    // One K type everywhere: the code llama-quantize --pure writes for it.
    case kernels::WeightType::Q2_K: return 10;
    case kernels::WeightType::Q3_K: return 12;  // "mostly Q3_K_M"
    case kernels::WeightType::Q4_K: return 15;  // "mostly Q4_K_M"
    case kernels::WeightType::Q5_K: return 17;  // "mostly Q5_K_M"
    case kernels::WeightType::Q6_K: return 18;
    case kernels::WeightType::Q4_1: return 3;
    case kernels::WeightType::Q5_0: return 8;
    case kernels::WeightType::Q5_1: return 9;
    case kernels::WeightType::IQ4_NL: return 25;
    case kernels::WeightType::IQ4_XS: return 30;
  }
  GLACIER_ASSERT(false, "unknown weight type");
  return 0;
}

enum class Fill { Matrix, Embedding, Norm, RopeFreqs, Bias };
constexpr float kBiasStd = 0.2f;  // exp_probs_b: comparable to the spread of sigmoid router probabilities
constexpr float kRopeFreqsLast = 8.0f;  // Llama 3.1's factor for its lowest frequencies

struct PlannedTensor {
  std::string name;
  int64_t cols = 0;  // row length (ggml ne[0])
  int64_t rows = 1;  // 1 for a vector
  bool is_vector = false;
  Fill fill = Fill::Matrix;
  kernels::WeightType type = kernels::WeightType::F32;
  int64_t depth = 0;  // > 0: a 3-D tensor of `depth` matrices of rows / depth rows each (MoE experts)
};

int64_t qwen3moe_head_dim(const SyntheticModelSpec& s) {
  return s.qwen3moe.head_dim > 0 ? s.qwen3moe.head_dim : s.n_embd / s.n_head;
}

std::vector<PlannedTensor> plan_tensors(const SyntheticModelSpec& s, int32_t n_vocab) {
  const int64_t head_dim = s.n_embd / s.n_head;
  const int64_t q_dim = s.n_head * head_dim, kv_dim = s.n_head_kv * head_dim;
  const MixModelShape shape{s.n_layer, s.n_head, s.n_head_kv, s.arch == "qwen3moe" ? s.qwen3moe.n_expert : 0, s.arch};
  auto type_of = [&s, shape](const std::string& name) {
    return s.k_quant_mix == KQuantMix::None ? s.weight_type : k_quant_mix_type(s.k_quant_mix, name, shape);
  };
  auto matrix = [&type_of](std::string name, int64_t cols, int64_t rows) {
    const kernels::WeightType t = type_of(name);
    return PlannedTensor{std::move(name), cols, rows, false, Fill::Matrix, t};
  };
  auto norm = [&s](std::string name) {
    return PlannedTensor{std::move(name), s.n_embd, 1, true, Fill::Norm, kernels::WeightType::F32};
  };
  const bool gemma2 = s.arch == "gemma2";
  std::vector<PlannedTensor> plan;
  plan.push_back(PlannedTensor{"token_embd.weight", s.n_embd, n_vocab, false, Fill::Embedding, type_of("token_embd.weight")});
  for (int32_t l = 0; l < s.n_layer && s.arch == "deepseek2"; ++l) {
    const SyntheticModelSpec::DeepSeek& d = s.deepseek;
    const std::string b = "blk." + std::to_string(l) + ".";
    const int64_t H = s.n_head, hd = d.nope_dim + d.rope_dim;
    auto vec = [](std::string name, int64_t n, Fill fill) {
      return PlannedTensor{std::move(name), n, 1, true, fill, kernels::WeightType::F32};
    };
    plan.push_back(norm(b + "attn_norm.weight"));
    if (d.q_lora_rank > 0) {
      plan.push_back(matrix(b + "attn_q_a.weight", s.n_embd, d.q_lora_rank));
      plan.push_back(vec(b + "attn_q_a_norm.weight", d.q_lora_rank, Fill::Norm));
      plan.push_back(matrix(b + "attn_q_b.weight", d.q_lora_rank, H * hd));
    } else {
      plan.push_back(matrix(b + "attn_q.weight", s.n_embd, H * hd));
    }
    plan.push_back(matrix(b + "attn_kv_a_mqa.weight", s.n_embd, d.kv_lora_rank + d.rope_dim));
    plan.push_back(vec(b + "attn_kv_a_norm.weight", d.kv_lora_rank, Fill::Norm));
    plan.push_back(matrix(b + "attn_kv_b.weight", d.kv_lora_rank, H * (d.nope_dim + d.v_head_dim)));
    plan.push_back(matrix(b + "attn_output.weight", H * d.v_head_dim, s.n_embd));
    plan.push_back(norm(b + "ffn_norm.weight"));
    if (l < d.leading_dense) {
      plan.push_back(matrix(b + "ffn_gate.weight", s.n_embd, s.n_ff));
      plan.push_back(matrix(b + "ffn_up.weight", s.n_embd, s.n_ff));
      plan.push_back(matrix(b + "ffn_down.weight", s.n_ff, s.n_embd));
      continue;
    }
    plan.push_back(PlannedTensor{b + "ffn_gate_inp.weight", s.n_embd, d.n_expert, false, Fill::Matrix,
                                 kernels::WeightType::F32});  // the router stays f32, as llama.cpp's converter keeps it
    if (d.exp_probs_b) plan.push_back(vec(b + "exp_probs_b.bias", d.n_expert, Fill::Bias));
    const int64_t F = d.n_ff_expert, X = d.n_expert, S = static_cast<int64_t>(d.n_ff_expert) * d.n_expert_shared;
    auto experts = [&](std::string name, int64_t cols, int64_t rows) {
      PlannedTensor t = matrix(std::move(name), cols, rows * X);
      t.depth = X;
      return t;
    };
    plan.push_back(experts(b + "ffn_gate_exps.weight", s.n_embd, F));
    plan.push_back(experts(b + "ffn_up_exps.weight", s.n_embd, F));
    plan.push_back(experts(b + "ffn_down_exps.weight", F, s.n_embd));
    plan.push_back(matrix(b + "ffn_gate_shexp.weight", s.n_embd, S));
    plan.push_back(matrix(b + "ffn_up_shexp.weight", s.n_embd, S));
    plan.push_back(matrix(b + "ffn_down_shexp.weight", S, s.n_embd));
  }
  for (int32_t l = 0; l < s.n_layer && s.arch == "qwen3moe"; ++l) {
    // llama.cpp's qwen3moe layout: q/k/v/o sized by head_dim (key_length), q/k norms of one head's width, a router
    // and the three stacked expert tensors [row length, rows, experts].
    const SyntheticModelSpec::Qwen3Moe& m = s.qwen3moe;
    const std::string b = "blk." + std::to_string(l) + ".";
    const int64_t hd = qwen3moe_head_dim(s), X = m.n_expert, F = m.n_ff_expert;
    auto head_norm = [hd](std::string name) {
      return PlannedTensor{std::move(name), hd, 1, true, Fill::Norm, kernels::WeightType::F32};
    };
    auto experts = [&](std::string name, int64_t cols, int64_t rows) {
      PlannedTensor t = matrix(std::move(name), cols, rows * X);
      t.depth = X;
      return t;
    };
    plan.push_back(norm(b + "attn_norm.weight"));
    plan.push_back(matrix(b + "attn_q.weight", s.n_embd, s.n_head * hd));
    plan.push_back(matrix(b + "attn_k.weight", s.n_embd, s.n_head_kv * hd));
    plan.push_back(matrix(b + "attn_v.weight", s.n_embd, s.n_head_kv * hd));
    plan.push_back(matrix(b + "attn_output.weight", s.n_head * hd, s.n_embd));
    plan.push_back(head_norm(b + "attn_q_norm.weight"));
    plan.push_back(head_norm(b + "attn_k_norm.weight"));
    plan.push_back(norm(b + "ffn_norm.weight"));
    // llama-quantize never quantizes the router (ffn_gate_inp): it stays f32 whatever --type says.
    plan.push_back(PlannedTensor{b + "ffn_gate_inp.weight", s.n_embd, X, false, Fill::Matrix, kernels::WeightType::F32});
    plan.push_back(experts(b + "ffn_gate_exps.weight", s.n_embd, F));
    plan.push_back(experts(b + "ffn_up_exps.weight", s.n_embd, F));
    plan.push_back(experts(b + "ffn_down_exps.weight", F, s.n_embd));
  }
  for (int32_t l = 0; l < s.n_layer && s.arch != "deepseek2" && s.arch != "qwen3moe"; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    plan.push_back(norm(b + "attn_norm.weight"));
    plan.push_back(matrix(b + "attn_q.weight", s.n_embd, q_dim));
    plan.push_back(matrix(b + "attn_k.weight", s.n_embd, kv_dim));
    plan.push_back(matrix(b + "attn_v.weight", s.n_embd, kv_dim));
    plan.push_back(matrix(b + "attn_output.weight", q_dim, s.n_embd));
    if (gemma2) plan.push_back(norm(b + "post_attention_norm.weight"));
    plan.push_back(norm(b + "ffn_norm.weight"));
    plan.push_back(matrix(b + "ffn_gate.weight", s.n_embd, s.n_ff));
    plan.push_back(matrix(b + "ffn_up.weight", s.n_embd, s.n_ff));
    plan.push_back(matrix(b + "ffn_down.weight", s.n_ff, s.n_embd));
    if (gemma2) plan.push_back(norm(b + "post_ffw_norm.weight"));
  }
  if (s.rope_freqs) {
    const int64_t pairs = s.n_embd / s.n_head / 2;
    plan.push_back(PlannedTensor{"rope_freqs.weight", pairs, 1, true, Fill::RopeFreqs, kernels::WeightType::F32});
  }
  plan.push_back(norm("output_norm.weight"));
  if (!gemma2) plan.push_back(matrix("output.weight", s.n_embd, n_vocab));  // gemma2 always reuses the embedding
  return plan;
}

void check_spec(const SyntheticModelSpec& s) {
  auto positive = [](const std::string& option, int64_t v, int64_t max) {
    if (v < 1 || v > max) bad_option(option, "an integer in 1.." + std::to_string(max), std::to_string(v));
  };
  if (s.arch != "llama" && s.arch != "granite" && s.arch != "gemma2" && s.arch != "deepseek2" && s.arch != "qwen3moe")
    bad_option("arch", "llama, granite, gemma2, deepseek2 or qwen3moe", "'" + s.arch + "'");
  const bool qwen3moe = s.arch == "qwen3moe";
  if (qwen3moe) {
    const SyntheticModelSpec::Qwen3Moe& m = s.qwen3moe;
    for (const auto& [name, v] : {std::pair<const char*, int32_t>{"n-expert", m.n_expert}, {"n-expert-used", m.n_expert_used},
                                  {"n-ff-expert", m.n_ff_expert}})
      if (v < 1 || v > (1 << 20)) bad_option(name, "an integer in 1..2^20", std::to_string(v));
    if (m.n_expert_used > m.n_expert) bad_option("n-expert-used", "at most --n-expert", std::to_string(m.n_expert_used));
    if (m.head_dim < 0 || m.head_dim > (1 << 16) || m.head_dim % 2 != 0)
      bad_option("head-dim", "an even width in 2..65536 (rotary pairs), or 0 for n_embd / n_head", std::to_string(m.head_dim));
  } else if (s.qwen3moe.head_dim != 0) {
    bad_option("head-dim", "no head width for --arch " + s.arch + " (qwen3moe only; the others use n_embd / n_head)",
               std::to_string(s.qwen3moe.head_dim));
  }
  for (const float v : {s.granite.embedding_scale, s.granite.residual_scale, s.granite.attention_scale, s.granite.logit_scale})
    if (!(v >= 0.0f && v <= 1e6f)) bad_option("granite scales", "scales in [0, 1e6] (0: none)", std::to_string(v));
  if (s.arch == "deepseek2") {
    const SyntheticModelSpec::DeepSeek& d = s.deepseek;
    if (d.q_lora_rank < 0 || d.q_lora_rank > (1 << 20)) bad_option("q-lora-rank", "0..2^20", std::to_string(d.q_lora_rank));
    for (const auto& [name, v] : {std::pair<const char*, int32_t>{"kv-lora-rank", d.kv_lora_rank}, {"rope-dim", d.rope_dim},
                                  {"nope-dim", d.nope_dim}, {"v-head-dim", d.v_head_dim}, {"n-expert", d.n_expert},
                                  {"n-expert-used", d.n_expert_used}, {"n-expert-shared", d.n_expert_shared},
                                  {"n-ff-expert", d.n_ff_expert}})
      if (v < 1 || v > (1 << 20)) bad_option(name, "an integer in 1..2^20", std::to_string(v));
    if (d.rope_dim % 2 != 0) bad_option("rope-dim", "an even count (rotary pairs)", std::to_string(d.rope_dim));
    if (d.n_expert_used > d.n_expert) bad_option("n-expert-used", "at most --n-expert", std::to_string(d.n_expert_used));
    if (d.leading_dense < 0 || d.leading_dense > s.n_layer)
      bad_option("leading-dense", "0..--n-layer", std::to_string(d.leading_dense));
    if (s.n_head_kv != s.n_head) bad_option("n-head-kv", "--n-head for deepseek2", std::to_string(s.n_head_kv));
    if (is_block_type(s.weight_type)) bad_option("type", "f32, f16 or bf16 for deepseek2", lower_type_name(s.weight_type));
    if (!(d.weights_scale > 0.0f)) bad_option("expert-weights-scale", "a positive scale", std::to_string(d.weights_scale));
  }
  if (s.arch != "gemma2" && s.sliding_window != 0)
    bad_option("sliding-window", "no window for --arch " + s.arch + " (gemma2 only)", std::to_string(s.sliding_window));
  if (s.sliding_window < 0) bad_option("sliding-window", "a window >= 1 (or 0: no key)", std::to_string(s.sliding_window));
  if (!(s.attn_softcap > 0.0f && s.final_softcap > 0.0f) || !std::isfinite(s.attn_softcap) || !std::isfinite(s.final_softcap))
    bad_option("softcap", "positive finite caps", std::to_string(s.attn_softcap) + ":" + std::to_string(s.final_softcap));
  if (s.rope_freqs && s.arch != "llama") bad_option("rope-freqs", "--arch llama (Llama 3's tensor)", "--arch " + s.arch);
  // llama-quantize gives a tied embedding (gemma2) the output head's type, a rule the mix table leaves out, and
  // deepseek2's latent-attention tensors rules of their own.
  if (s.k_quant_mix != KQuantMix::None && s.arch != "llama" && s.arch != "granite" && s.arch != "qwen3moe")
    bad_option("type", "a single weight type with --arch " + s.arch + " (the K-quant mixes follow llama-quantize's "
               "rules for llama, granite and qwen3moe files)", k_quant_mix_name(s.k_quant_mix));
  positive("n-embd", s.n_embd, 1 << 20);
  positive("n-layer", s.n_layer, 4096);
  positive("n-head", s.n_head, 4096);
  positive("n-head-kv", s.n_head_kv, 4096);
  positive("n-ff", s.n_ff, 1 << 22);
  positive("ctx", s.n_ctx, 1 << 30);
  // An explicit qwen3moe head width need not divide n_embd (Qwen3's q is n_head x head_dim wide).
  const bool own_head_dim = qwen3moe && s.qwen3moe.head_dim > 0;
  if (s.n_embd % s.n_head != 0 && !own_head_dim)
    bad_option("n-head", "a divisor of --n-embd " + std::to_string(s.n_embd), std::to_string(s.n_head));
  if ((s.n_embd / s.n_head) % 2 != 0 && !own_head_dim)
    bad_option("n-head", "a head count giving an even head size (rotary pairs), n_embd / n_head",
               std::to_string(s.n_embd) + " / " + std::to_string(s.n_head) + " = " + std::to_string(s.n_embd / s.n_head));
  if (s.n_head % s.n_head_kv != 0)
    bad_option("n-head-kv", "a divisor of --n-head " + std::to_string(s.n_head), std::to_string(s.n_head_kv));
  // A mix's types all share its base type's 256-element super-blocks. Every quantized row length must be a
  // multiple of the block: where it is not, llama-quantize stops (Q8_0, Q4_0, ...: "Unsupported tensor size") or
  // falls back to another type for that tensor (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K/IQ4_XS ->
  // IQ4_NL); this writer refuses instead, so a file's quantized tensors all have the type asked for.
  const bool mix = s.k_quant_mix != KQuantMix::None;
  const kernels::WeightType base = mix ? k_quant_mix_base(s.k_quant_mix) : s.weight_type;
  if (is_block_type(base)) {
    const std::string why = "a multiple of " + std::to_string(block_size(base)) + " (the block size of --type " +
                            std::string(mix ? k_quant_mix_name(s.k_quant_mix) : lower_type_name(base)) + ")";
    if (s.n_embd % block_size(base) != 0) bad_option("n-embd", why, std::to_string(s.n_embd));
    if (qwen3moe) {
      // Row lengths: n_embd, the attention output's n_head x head_dim and the down experts' n_ff_expert
      // (feed_forward_length is only a key here).
      const int64_t q_dim = s.n_head * qwen3moe_head_dim(s);
      if (q_dim % block_size(base) != 0)
        bad_option("head-dim", why + " for n_head x head_dim (attn_output's row length)",
                   std::to_string(s.n_head) + " x " + std::to_string(qwen3moe_head_dim(s)) + " = " + std::to_string(q_dim));
      if (s.qwen3moe.n_ff_expert % block_size(base) != 0) bad_option("n-ff-expert", why, std::to_string(s.qwen3moe.n_ff_expert));
    } else if (s.n_ff % block_size(base) != 0) {
      bad_option("n-ff", why, std::to_string(s.n_ff));
    }
  }
  if (!(s.rope_base > 1.0f) || !std::isfinite(s.rope_base))
    bad_option("rope-base", "a finite value > 1", std::to_string(s.rope_base));
  if (!(s.rms_eps > 0.0f && s.rms_eps < 1.0f)) bad_option("rms-eps", "a value in (0, 1)", std::to_string(s.rms_eps));
  if (s.threads < 0) bad_option("threads", "a count >= 0", std::to_string(s.threads));
  if (!s.rope_scaling_type.empty() && s.rope_scaling_type != "linear" && s.rope_scaling_type != "yarn")
    bad_option("rope-scaling", "linear:FACTOR or yarn:FACTOR", "type '" + s.rope_scaling_type + "'");
  if (!s.rope_scaling_type.empty() && !(s.rope_scaling_factor >= 1.0f && s.rope_scaling_factor <= 1024.0f))
    bad_option("rope-scaling", "a factor in [1, 1024]", std::to_string(s.rope_scaling_factor));
}

// Copies every tokenizer.* key of the vocabulary file; returns its token count.
int32_t copy_vocab_keys(const SyntheticModelSpec& s, gguf::StreamWriter& w) {
  const auto file = gguf::File::open(s.vocab_from);
  const char* const tokens_key = "tokenizer.ggml.tokens";
  const gguf::Value* tokens = file->find(tokens_key);
  const gguf::Array* items = tokens ? std::get_if<gguf::Array>(&tokens->data) : nullptr;
  if (!items || items->elem_type != gguf::ValueType::STRING || items->items.empty())
    throw InputError(s.vocab_from + ": key '" + tokens_key + "': expected a non-empty array of strings, found " +
                     (tokens ? gguf::value_type_name(tokens->type) : "nothing (key missing)"));
  const auto count = static_cast<int64_t>(items->items.size());
  if (count > (1 << 30)) bad_option("vocab-from", "at most 2^30 tokens", std::to_string(count));
  if (s.n_vocab != 0 && s.n_vocab != count)
    bad_option("n-vocab", "the token count of --vocab-from " + s.vocab_from + " (" + std::to_string(count) + ")",
               std::to_string(s.n_vocab));
  for (const auto& [key, value] : file->metadata())
    if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
  return static_cast<int32_t>(count);
}

int32_t write_builtin_vocab(const SyntheticModelSpec& s, gguf::StreamWriter& w) {
  int32_t n_vocab = s.n_vocab;
  if (n_vocab == 0) n_vocab = std::max(kTinyMinVocab, builtin_vocab_size());
  if (n_vocab < SyntheticVocab::kMinSize || n_vocab > (1 << 30))
    bad_option("n-vocab", "at least " + std::to_string(SyntheticVocab::kMinSize) +
                              " (3 special and 256 byte tokens) and at most 2^30", std::to_string(n_vocab));
  const SyntheticVocab v = make_synthetic_vocab(n_vocab);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_f32_array("tokenizer.ggml.scores", v.scores);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  w.set_u32("tokenizer.ggml.bos_token_id", SyntheticVocab::kBos);
  w.set_u32("tokenizer.ggml.eos_token_id", SyntheticVocab::kEos);
  w.set_u32("tokenizer.ggml.unknown_token_id", SyntheticVocab::kUnk);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);
  return n_vocab;
}

// general.* and ARCH.* keys; ARCH.vocab_size is a placeholder until the vocabulary is known (set()
// replaces it in place, so the key order stays general, llama, tokenizer).
void write_model_keys(const SyntheticModelSpec& s, gguf::StreamWriter& w) {
  const std::string a = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name", s.name);
  w.set_u32("general.file_type", s.k_quant_mix == KQuantMix::None ? file_type_code(s.weight_type)
                                                                   : k_quant_mix_file_type(s.k_quant_mix));
  if (s.k_quant_mix != KQuantMix::None || is_block_type(s.weight_type)) w.set_u32("general.quantization_version", 2);
  for (const auto& [key, v] : {std::pair<const char*, int32_t>{"context_length", s.n_ctx}, {"embedding_length", s.n_embd},
                               {"block_count", s.n_layer}, {"feed_forward_length", s.n_ff},
                               {"attention.head_count", s.n_head}, {"attention.head_count_kv", s.n_head_kv}})
    w.set_u32(a + key, static_cast<uint32_t>(v));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_f32(a + "rope.freq_base", s.rope_base);
  if (s.arch == "deepseek2") {
    const SyntheticModelSpec::DeepSeek& d = s.deepseek;
    w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(d.rope_dim));
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(d.nope_dim + d.rope_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(d.v_head_dim));
    if (d.q_lora_rank > 0) w.set_u32(a + "attention.q_lora_rank", static_cast<uint32_t>(d.q_lora_rank));
    w.set_u32(a + "attention.kv_lora_rank", static_cast<uint32_t>(d.kv_lora_rank));
    w.set_u32(a + "leading_dense_block_count", static_cast<uint32_t>(d.leading_dense));
    w.set_u32(a + "expert_count", static_cast<uint32_t>(d.n_expert));
    w.set_u32(a + "expert_used_count", static_cast<uint32_t>(d.n_expert_used));
    w.set_u32(a + "expert_shared_count", static_cast<uint32_t>(d.n_expert_shared));
    w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(d.n_ff_expert));
    w.set_f32(a + "expert_weights_scale", d.weights_scale);
    w.set_bool(a + "expert_weights_norm", d.weights_norm);
    w.set_u32(a + "expert_gating_func", d.sigmoid_gating ? 2u : 1u);
    w.set_f32(a + "rope.scaling.yarn_log_multiplier", d.yarn_log_multiplier);
  } else if (s.arch == "qwen3moe") {
    // As Qwen3-MoE files from llama.cpp's converter: head width as key/value length, no rope.dimension_count
    // (llama.cpp then rotates the whole head).
    const SyntheticModelSpec::Qwen3Moe& m = s.qwen3moe;
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(qwen3moe_head_dim(s)));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(qwen3moe_head_dim(s)));
    w.set_u32(a + "expert_count", static_cast<uint32_t>(m.n_expert));
    w.set_u32(a + "expert_used_count", static_cast<uint32_t>(m.n_expert_used));
    w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(m.n_ff_expert));
  } else {
    w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(s.n_embd / s.n_head));
  }
  if (!s.rope_scaling_type.empty()) {
    w.set_string(a + "rope.scaling.type", s.rope_scaling_type);
    w.set_f32(a + "rope.scaling.factor", s.rope_scaling_factor);
    if (s.rope_scaling_type == "yarn") w.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(s.n_ctx));
  }
  if (s.arch == "granite") {
    w.set_f32(a + "embedding_scale", s.granite.embedding_scale);
    w.set_f32(a + "residual_scale", s.granite.residual_scale);
    w.set_f32(a + "attention.scale", s.granite.attention_scale);
    w.set_f32(a + "logit_scale", s.granite.logit_scale);
  }
  if (s.arch == "gemma2") {
    if (s.sliding_window > 0) w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(s.sliding_window));
    w.set_f32(a + "attn_logit_softcapping", s.attn_softcap);
    w.set_f32(a + "final_logit_softcapping", s.final_softcap);
  }
  w.set_u32(a + "vocab_size", 0);
}

void fill_row(const PlannedTensor& t, uint64_t tensor_seed, int64_t row, float* out) {
  fill_standard_normal(mix64(tensor_seed ^ mix64(static_cast<uint64_t>(row))), out, t.cols);
  switch (t.fill) {
    case Fill::Matrix: {
      const float scale = kMatrixGain / std::sqrt(static_cast<float>(t.cols));
      for (int64_t i = 0; i < t.cols; ++i) out[i] *= scale;
      break;
    }
    case Fill::Embedding:
      for (int64_t i = 0; i < t.cols; ++i) out[i] *= kEmbeddingStd;
      break;
    case Fill::Norm:
      for (int64_t i = 0; i < t.cols; ++i) out[i] = 1.0f + kNormSpread * out[i];
      break;
    case Fill::Bias:
      for (int64_t i = 0; i < t.cols; ++i) out[i] *= kBiasStd;
      break;
    case Fill::RopeFreqs:
      for (int64_t i = 0; i < t.cols; ++i)
        out[i] = t.cols == 1 ? 1.0f : 1.0f + (kRopeFreqsLast - 1.0f) * static_cast<float>(i) / static_cast<float>(t.cols - 1);
      break;
  }
}

void stream_tensor(const PlannedTensor& t, uint64_t seed, ThreadPool& pool, gguf::StreamWriter& w) {
  const size_t row_bytes = kernels::encoded_bytes(t.type, t.cols);
  const int64_t chunk_rows = std::clamp<int64_t>(static_cast<int64_t>(kChunkBytes / row_bytes), 1, t.rows);
  std::vector<uint8_t> chunk(static_cast<size_t>(chunk_rows) * row_bytes);
  const uint64_t tensor_seed = mix64(mix64(seed) ^ name_hash(t.name));
  for (int64_t first = 0; first < t.rows; first += chunk_rows) {
    const int64_t n = std::min(chunk_rows, t.rows - first);
    pool.parallel_for(n, [&](int64_t begin, int64_t end, int) {
      std::vector<float> row(static_cast<size_t>(t.cols));
      for (int64_t r = begin; r < end; ++r) {
        fill_row(t, tensor_seed, first + r, row.data());
        kernels::encode_row(t.type, row.data(), chunk.data() + static_cast<size_t>(r) * row_bytes, t.cols);
      }
    });
    w.write_data(chunk.data(), static_cast<size_t>(n) * row_bytes);
  }
}

std::string checked_temp_path(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) bad_option("out", "an output file path", "nothing");
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty() && !fs::is_directory(parent, ec))
    bad_option("out", "a path in an existing directory", "'" + path + "' (no directory '" + parent.string() + "')");
  if (fs::is_directory(path, ec)) bad_option("out", "a file path", "'" + path + "', a directory");
  return path + ".partial";
}

}  // namespace

SyntheticModelSpec synthetic_preset(const std::string& preset) {
  SyntheticModelSpec s;
  if (preset == "tiny") return s;  // the struct's defaults
  s.n_vocab = 32000;
  s.n_head = 32;
  if (preset == "qwen3moe-1.4b") {
    // Qwen3-30B-A3B's proportions at half its width and half its depth (2048 wide, 48 layers, 32/4 heads of 128,
    // 128 experts of 768, top 8): 1024 wide, 24 layers, 16/4 heads of 128 (q twice n_embd, as there), 64 experts of
    // 256, top 8, feed_forward_length = 8 x 256 (Qwen3-30B-A3B: 8 x 768). 1.40 G parameters, 1.39 GiB at q8_0.
    s.arch = "qwen3moe";
    s.n_embd = 1024, s.n_layer = 24, s.n_head = 16, s.n_head_kv = 4, s.n_ff = 2048;
    s.qwen3moe = {.head_dim = 128, .n_expert = 64, .n_expert_used = 8, .n_ff_expert = 256};
    s.rms_eps = 1e-6f;  // Qwen3's
  } else if (preset == "llama-1b") {
    s.n_embd = 2048, s.n_layer = 16, s.n_ff = 8192, s.n_head_kv = 8;
  } else if (preset == "llama-7b") {
    s.n_embd = 4096, s.n_layer = 32, s.n_ff = 11008, s.n_head_kv = 32;
  } else {
    bad_option("preset", "tiny, llama-1b, llama-7b or qwen3moe-1.4b", "'" + preset + "'");
  }
  s.name = "glacier-synthetic-" + preset;
  return s;
}

kernels::WeightType synthetic_weight_type(const std::string& name) {
  for (kernels::WeightType t : kWritableTypes)
    if (name == lower_type_name(t)) return t;
  bad_option("type", kTypeChoices, "'" + name + "'");
}

void set_synthetic_type(SyntheticModelSpec& spec, const std::string& name) {
  if (const std::optional<KQuantMix> mix = k_quant_mix_named(name)) {
    spec.k_quant_mix = *mix;
    spec.weight_type = k_quant_mix_base(*mix);
    return;
  }
  spec.k_quant_mix = KQuantMix::None;
  spec.weight_type = synthetic_weight_type(name);
}

void fill_standard_normal(uint64_t stream_seed, float* out, int64_t n) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  constexpr double kUnit = 1.0 / 9007199254740992.0;  // 2^-53: top 53 bits -> [0, 1)
  std::mt19937_64 bits(stream_seed);
  for (int64_t i = 0; i < n; i += 2) {
    // u1 in (0, 1] keeps the logarithm finite.
    const double u1 = (static_cast<double>(bits() >> 11) + 1.0) * kUnit;
    const double u2 = static_cast<double>(bits() >> 11) * kUnit;
    const double radius = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(radius * std::cos(kTwoPi * u2));
    if (i + 1 < n) out[i + 1] = static_cast<float>(radius * std::sin(kTwoPi * u2));
  }
}

SyntheticModelSummary write_synthetic_model(const SyntheticModelSpec& spec, const std::string& path,
                                            const SyntheticProgress& progress) {
  check_spec(spec);
  const std::string temp = checked_temp_path(path);

  gguf::StreamWriter w;
  write_model_keys(spec, w);
  const int32_t n_vocab = spec.vocab_from.empty() ? write_builtin_vocab(spec, w) : copy_vocab_keys(spec, w);
  w.set_u32(spec.arch + ".vocab_size", static_cast<uint32_t>(n_vocab));

  SyntheticModelSummary summary;
  summary.n_vocab = n_vocab;
  const std::vector<PlannedTensor> plan = plan_tensors(spec, n_vocab);
  uint64_t total = 0;
  for (const PlannedTensor& t : plan) {
    std::vector<int64_t> ne = t.is_vector ? std::vector<int64_t>{t.cols} : std::vector<int64_t>{t.cols, t.rows};
    if (t.depth > 0) ne = {t.cols, t.rows / t.depth, t.depth};
    total += w.add_tensor_info(t.name, gguf_type(t.type), ne);
    summary.n_params += static_cast<uint64_t>(t.cols * t.rows);
  }

  const int threads = spec.threads > 0 ? spec.threads : std::max(1u, std::thread::hardware_concurrency());
  ThreadPool pool(threads);
  try {
    w.open(temp);
    uint64_t done = 0;
    for (const PlannedTensor& t : plan) {
      stream_tensor(t, spec.seed, pool, w);
      done += kernels::encoded_bytes(t.type, t.cols * t.rows);
      if (progress) progress(t.name, done, total);
    }
    w.close();
    std::error_code ec;
    std::filesystem::rename(temp, path, ec);
    if (ec) throw InputError(path + ": cannot move the finished model from " + temp + " here: " + ec.message());
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw;
  }
  summary.file_bytes = w.bytes_written();
  return summary;
}

}  // namespace glacier::model
