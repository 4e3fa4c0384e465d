// Shard loading: tensor lookup by the llama naming scheme (which tensors a layer has comes from the
// architecture table), shape and type checks with messages that name the tensor, and views (no copies)
// into the mapped file for the matrices.
#include "model/model_weights.h"

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "gguf/gguf_file.h"
#include "kernels/quant_blocks.h"
#include "model/finite_scan.h"
#include "model/weight_packing.h"
#include "util/error.h"

namespace glacier::model {
namespace {

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

std::string shape_str(const gguf::TensorInfo& t) {
  std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
  return shape_str(ne);
}

const gguf::TensorInfo& require_tensor(const gguf::File& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) throw InputError(f.path() + ": tensor '" + name + "': required by the model but missing from the file");
  return *t;
}

// Records a tensor the shard maps: its bytes count towards the shard, and the finite scan walks it.
void note_use(ShardWeights* shard, const gguf::TensorInfo& t) {
  shard->bytes += t.n_bytes;
  shard->tensors.push_back(&t);
}

void check_shape(const gguf::File& f, const gguf::TensorInfo& t, const std::vector<int64_t>& expected) {
  bool ok = t.n_dims == static_cast<int>(expected.size());
  for (size_t i = 0; ok && i < expected.size(); ++i) ok = t.ne[i] == expected[i];
  if (!ok)
    throw InputError(f.path() + ": tensor '" + t.name + "': expected shape " + shape_str(expected) + ", found " +
                     shape_str(t));
}

kernels::Matrix matrix(const gguf::File& f, const std::string& name, int64_t cols, int64_t rows, ShardWeights* shard) {
  const gguf::TensorInfo& t = require_tensor(f, name);
  check_shape(f, t, {cols, rows});
  kernels::Matrix m;
  m.type = weight_type_of(f, t);
  m.data = t.data;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = static_cast<size_t>(t.n_bytes / static_cast<uint64_t>(rows));
  m.block_sum_order = kernels::preferred_block_sum_order(m.type, rows);
  f.prefetch(t);
  note_use(shard, t);
  return m;
}

std::vector<float> norm_vector(const gguf::File& f, const std::string& name, int64_t n, ShardWeights* shard) {
  const gguf::TensorInfo& t = require_tensor(f, name);
  check_shape(f, t, {n});
  std::vector<float> v(static_cast<size_t>(n));
  if (t.type == gguf::TensorType::F32) {
    std::memcpy(v.data(), t.data, static_cast<size_t>(n) * 4);
  } else if (t.type == gguf::TensorType::F16 || t.type == gguf::TensorType::BF16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      v[i] = t.type == gguf::TensorType::F16 ? kernels::fp16_to_f32(h) : kernels::bf16_to_f32(h);
    }
  } else {
    throw InputError(f.path() + ": tensor '" + name + "': expected type f32, f16 or bf16 for a norm vector, found " +
                     gguf::type_name(t.type));
  }
  // Norm weights and biases are copied now and read by every token: always checked, whatever the scan policy.
  check_tensor_finite(f, t);
  note_use(shard, t);
  return v;
}

// A view of rows [first, first + n) of m (fused tensors are split this way, without copies).
kernels::Matrix row_view(const kernels::Matrix& m, int64_t first, int64_t n) {
  GLACIER_ASSERT(first >= 0 && n >= 0 && first + n <= m.rows, "row view inside the matrix");
  kernels::Matrix v = m;
  v.data = static_cast<const uint8_t*>(m.data) + static_cast<size_t>(first) * m.row_bytes;
  v.rows = n;
  return v;
}

// One matrix per expert of a 3-D tensor [cols, rows, n_expert]: expert e starts e * rows rows in. Under
// expert parallelism the experts the shard does not hold stay unset, and the shard records a slice of
// the tensor per held expert in place of the whole tensor, so that nothing reads the others' bytes.
std::vector<kernels::Matrix> expert_matrices(const gguf::File& f, const std::string& name, int64_t cols, int64_t rows,
                                             int64_t n_expert, ShardWeights* shard) {
  const gguf::TensorInfo& t = require_tensor(f, name);
  check_shape(f, t, {cols, rows, n_expert});
  kernels::Matrix all;
  all.type = weight_type_of(f, t);
  all.data = t.data;
  all.rows = rows * n_expert;
  all.cols = cols;
  all.row_bytes = static_cast<size_t>(t.n_bytes / static_cast<uint64_t>(rows * n_expert));
  all.block_sum_order = kernels::preferred_block_sum_order(all.type, rows);
  shard->all_expert_bytes += t.n_bytes;
  const ExpertShare share = shard->experts;
  if (share.count == 1) {
    f.prefetch(t);
    note_use(shard, t);
    shard->expert_bytes += t.n_bytes;
  }
  std::vector<kernels::Matrix> out;
  for (int64_t e = 0; e < n_expert; ++e) {
    if (!share.owns(static_cast<int32_t>(e))) {
      out.emplace_back();  // unset: another rank of the expert group holds it
      continue;
    }
    out.push_back(row_view(all, e * rows, rows));
    if (share.count == 1) continue;
    auto slice = std::make_shared<gguf::TensorInfo>(t);
    slice->name = t.name + " (expert " + std::to_string(e) + ")";
    slice->n_dims = 2;
    slice->ne[2] = 1;
    slice->n_bytes = static_cast<uint64_t>(rows) * all.row_bytes;
    slice->offset = t.offset + static_cast<uint64_t>(e) * slice->n_bytes;
    slice->data = t.data + static_cast<size_t>(e) * slice->n_bytes;
    f.prefetch(*slice);
    note_use(shard, *slice);
    shard->expert_bytes += slice->n_bytes;
    shard->expert_slices.push_back(std::move(slice));
  }
  return out;
}

// A 1-D weight [cols] used as a one-row matrix (qwen2moe's shared-expert gate).
kernels::Matrix one_row_matrix(const gguf::File& f, const std::string& name, int64_t cols, ShardWeights* shard) {
  const gguf::TensorInfo& t = require_tensor(f, name);
  check_shape(f, t, {cols});
  kernels::Matrix m;
  m.type = weight_type_of(f, t);
  m.data = t.data;
  m.rows = 1;
  m.cols = cols;
  m.row_bytes = static_cast<size_t>(t.n_bytes);
  m.block_sum_order = kernels::preferred_block_sum_order(m.type, m.rows);
  note_use(shard, t);
  return m;
}

// The 3-D expert tensors of a mixture-of-experts layer: one matrix per expert, shared out over an expert group.
constexpr const char* kStackedExperts[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};

std::string blk(int32_t layer, const char* what, const char* kind = "weight") {
  return "blk." + std::to_string(layer) + "." + what + "." + kind;
}

void load_latent_attention(const gguf::File& f, const ModelConfig& c, int32_t l, LayerWeights& lw, ShardWeights* shard) {
  const int64_t E = c.n_embd, Q = c.q_dim(), R = c.kv_lora_rank;
  if (c.q_lora_rank > 0) {
    lw.wq_a = matrix(f, blk(l, "attn_q_a"), E, c.q_lora_rank, shard);
    lw.q_a_norm = norm_vector(f, blk(l, "attn_q_a_norm"), c.q_lora_rank, shard);
    lw.wq_b = matrix(f, blk(l, "attn_q_b"), c.q_lora_rank, Q, shard);
  } else {
    lw.wq = matrix(f, blk(l, "attn_q"), E, Q, shard);
  }
  lw.wkv_a = matrix(f, blk(l, "attn_kv_a_mqa"), E, R + c.n_rot, shard);
  lw.kv_a_norm = norm_vector(f, blk(l, "attn_kv_a_norm"), R, shard);
  lw.wkv_b = matrix(f, blk(l, "attn_kv_b"), R, static_cast<int64_t>(c.n_head) * (c.nope_dim() + c.v_head_dim), shard);
  lw.wo = matrix(f, blk(l, "attn_output"), c.attn_out_dim(), E, shard);
}

void load_attention(const gguf::File& f, const ModelConfig& c, int32_t l, LayerWeights& lw, ShardWeights* shard) {
  const ArchSpec& a = c.spec;
  if (a.mla) return load_latent_attention(f, c, l, lw, shard);
  const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim();
  if (a.qkv == QkvLayout::Fused) {
    const kernels::Matrix qkv = matrix(f, blk(l, "attn_qkv"), E, Q + 2 * KV, shard);
    lw.wq = row_view(qkv, 0, Q);
    lw.wk = row_view(qkv, Q, KV);
    lw.wv = row_view(qkv, Q + KV, KV);
  } else {
    lw.wq = matrix(f, blk(l, "attn_q"), E, Q, shard);
    lw.wk = matrix(f, blk(l, "attn_k"), E, KV, shard);
    lw.wv = matrix(f, blk(l, "attn_v"), E, KV, shard);
  }
  if (a.qkv_bias) {
    lw.bq = norm_vector(f, blk(l, "attn_q", "bias"), Q, shard);
    lw.bk = norm_vector(f, blk(l, "attn_k", "bias"), KV, shard);
    lw.bv = norm_vector(f, blk(l, "attn_v", "bias"), KV, shard);
  }
  if (a.qk_norm) {
    lw.q_norm = norm_vector(f, blk(l, "attn_q_norm"), c.head_dim, shard);
    lw.k_norm = norm_vector(f, blk(l, "attn_k_norm"), c.head_dim, shard);
  }
  lw.wo = matrix(f, blk(l, "attn_output"), Q, E, shard);
}

void load_ffn(const gguf::File& f, const ModelConfig& c, int32_t l, LayerWeights& lw, ShardWeights* shard) {
  const int64_t E = c.n_embd;
  if (!c.layer_is_dense(l)) {
    const int64_t F = c.n_ff_expert, X = c.n_expert;
    lw.router = matrix(f, blk(l, "ffn_gate_inp"), E, X, shard);
    if (c.spec.mla && f.find_tensor(blk(l, "exp_probs_b", "bias")))
      lw.exp_probs_b = norm_vector(f, blk(l, "exp_probs_b", "bias"), X, shard);
    lw.gate_exps = expert_matrices(f, blk(l, kStackedExperts[0]), E, F, X, shard);
    lw.up_exps = expert_matrices(f, blk(l, kStackedExperts[1]), E, F, X, shard);
    lw.down_exps = expert_matrices(f, blk(l, kStackedExperts[2]), F, E, X, shard);
    if (c.spec.shared_expert) {
      const int64_t S = c.n_ff_shexp;
      if (!c.spec.mla) lw.shexp_gate = one_row_matrix(f, blk(l, "ffn_gate_inp_shexp"), E, shard);
      lw.gate_shexp = matrix(f, blk(l, "ffn_gate_shexp"), E, S, shard);
      lw.up_shexp = matrix(f, blk(l, "ffn_up_shexp"), E, S, shard);
      lw.down_shexp = matrix(f, blk(l, "ffn_down_shexp"), S, E, shard);
    }
    return;
  }
  const int64_t F = c.n_ff;
  if (c.spec.ffn == FfnLayout::FusedGateUp) {
    const kernels::Matrix gate_up = matrix(f, blk(l, "ffn_up"), E, 2 * F, shard);
    lw.w_gate = row_view(gate_up, 0, F);
    lw.w_up = row_view(gate_up, F, F);
  } else {
    lw.w_gate = matrix(f, blk(l, "ffn_gate"), E, F, shard);
    lw.w_up = matrix(f, blk(l, "ffn_up"), E, F, shard);
  }
  lw.w_down = matrix(f, blk(l, "ffn_down"), F, E, shard);
}

// The embedding and the output head have one row per token: a row count other than the vocabulary's
// means the tokenizer and the weights come from different models, which a bare shape message hides.
void check_vocab_rows(const gguf::File& f, const ModelConfig& c, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t || t->n_dims != 2 || t->ne[0] != c.n_embd || t->ne[1] == c.n_vocab) return;  // matrix() reports the rest
  throw InputError(f.path() + ": tensor '" + name + "': expected " + std::to_string(c.n_vocab) +
                   " rows, one per token of tokenizer.ggml.tokens, found " + std::to_string(t->ne[1]) +
                   " (the vocabulary and the weights do not belong together)");
}

// Whether the logits' projection is the token embedding.
bool head_is_tied(const gguf::File& f, const ModelConfig& c) {
  switch (c.spec.output) {
    case OutputTensor::AlwaysTied: return true;
    case OutputTensor::Required: return false;
    case OutputTensor::OptionalTied: return f.find_tensor("output.weight") == nullptr;
  }
  return false;
}

constexpr const char* kRopeFreqs = "rope_freqs.weight";

// Llama 3's rope frequency divisors: used when the architecture allows them and the file has them.
bool has_rope_freqs(const gguf::File& f, const ModelConfig& c) {
  return c.spec.rope_freqs && f.find_tensor(kRopeFreqs) != nullptr;
}

constexpr const char* kRopeFactorsLong = "rope_factors_long.weight";
constexpr const char* kRopeFactorsShort = "rope_factors_short.weight";

// Phi-3 LongRoPE: when the file has either tensor, both are expected (loading names a missing one).
bool has_rope_factors_long_short(const gguf::File& f, const ModelConfig& c) {
  return c.spec.rope_factors_long_short &&
         (f.find_tensor(kRopeFactorsLong) != nullptr || f.find_tensor(kRopeFactorsShort) != nullptr);
}

// A tensor of n_rot / 2 positive rotary frequency divisors.
std::vector<float> rope_divisors(const gguf::File& f, const char* name, const ModelConfig& c, ShardWeights* w) {
  std::vector<float> v = norm_vector(f, name, c.n_rot / 2, w);
  for (size_t i = 0; i < v.size(); ++i)
    if (!(v[i] > 0.0f))
      throw InputError(f.path() + ": tensor '" + name + "': expected positive frequency divisors, found " +
                       std::to_string(v[i]) + " at index " + std::to_string(i));
  return v;
}

// Calls fn with each expert the shard does not hold, as a tensor of that expert's bytes.
template <typename Fn>
void for_each_foreign_expert(const gguf::File& f, const ModelConfig& c, const ShardWeights& w, Fn fn) {
  for (int32_t l = w.layer_range.first; l < w.layer_range.last; ++l) {
    if (c.layer_is_dense(l)) continue;
    for (const char* what : kStackedExperts) {
      const gguf::TensorInfo& t = require_tensor(f, blk(l, what));
      const uint64_t per_expert = t.n_bytes / static_cast<uint64_t>(c.n_expert);
      for (int32_t e = 0; e < c.n_expert; ++e) {
        if (w.experts.owns(e)) continue;
        gguf::TensorInfo foreign = t;
        foreign.data = t.data + static_cast<size_t>(e) * per_expert;
        foreign.n_bytes = per_expert;
        fn(foreign);
      }
    }
  }
}

// Under expert parallelism, the experts the shard does not hold: nothing here reads them, but the kernel
// maps a file's pages in blocks (fault-around, large folios) that reach past the held experts' edges. Kept
// apart before any expert is read, so that reads of the held experts map none of theirs.
void keep_foreign_experts_apart(const gguf::File& f, const ModelConfig& c, const ShardWeights& w) {
  for_each_foreign_expert(f, c, w, [&f](const gguf::TensorInfo& foreign) { f.keep_apart(foreign); });
}

// ... and dropped after loading, in case a fault before the advice (the scan of another tensor) mapped some.
void release_foreign_experts(const gguf::File& f, const ModelConfig& c, const ShardWeights& w) {
  for_each_foreign_expert(f, c, w, [&f](const gguf::TensorInfo& foreign) { f.release(foreign); });
}

}  // namespace


ShardWeights load_shard(const gguf::File& f, const ModelConfig& c, LayerRange layers, bool has_embedding,
                        bool has_head, ThreadPool* scan_pool, const LoadProgress& progress, ExpertShare experts) {
  GLACIER_ASSERT(layers.first >= 0 && layers.first <= layers.last && layers.last <= c.n_layer, "layer range in model");
  GLACIER_ASSERT(experts.count >= 1 && experts.index >= 0 && experts.index < experts.count &&
                     (experts.count == 1 || (c.is_moe() && c.n_expert % experts.count == 0)),
                 "expert share divides the model's experts");
  ShardWeights w;
  w.experts = experts;
  w.layer_range = layers;
  if (experts.count > 1) keep_foreign_experts_apart(f, c, w);
  w.layer_range = layers;
  w.has_embedding = has_embedding;
  w.has_head = has_head;
  if (has_embedding) {
    check_vocab_rows(f, c, "token_embd.weight");
    w.token_embd = matrix(f, "token_embd.weight", c.n_embd, c.n_vocab, &w);
  }
  if (layers.first < layers.last && has_rope_freqs(f, c)) w.rope_freqs = rope_divisors(f, kRopeFreqs, c, &w);
  if (layers.first < layers.last && has_rope_factors_long_short(f, c)) {
    w.rope_factors_long = rope_divisors(f, kRopeFactorsLong, c, &w);
    w.rope_factors_short = rope_divisors(f, kRopeFactorsShort, c, &w);
  }
  for (int32_t l = layers.first; l < layers.last; ++l) {
    LayerWeights lw;
    lw.attn_norm = norm_vector(f, blk(l, "attn_norm"), c.n_embd, &w);
    load_attention(f, c, l, lw, &w);
    lw.ffn_norm = norm_vector(f, blk(l, "ffn_norm"), c.n_embd, &w);
    load_ffn(f, c, l, lw, &w);
    if (c.spec.post_norms) {
      lw.attn_post_norm = norm_vector(f, blk(l, "post_attention_norm"), c.n_embd, &w);
      lw.ffn_post_norm = norm_vector(f, blk(l, "post_ffw_norm"), c.n_embd, &w);
    }
    w.layer.push_back(std::move(lw));
  }
  if (has_head) {
    w.output_norm = norm_vector(f, "output_norm.weight", c.n_embd, &w);
    const char* head_name = head_is_tied(f, c) ? "token_embd.weight" : "output.weight";
    check_vocab_rows(f, c, head_name);
    w.output = matrix(f, head_name, c.n_embd, c.n_vocab, &w);
  }
  // check_weights_finite's scan, tensor by tensor, so that each one checked can be reported.
  std::set<const gguf::TensorInfo*> scanned;
  uint64_t total = 0, done = 0;
  for (const gguf::TensorInfo* t : w.tensors)
    if (scanned.insert(t).second) total += t->n_bytes;
  scanned.clear();
  for (const gguf::TensorInfo* t : w.tensors) {
    if (!scanned.insert(t).second) continue;
    check_tensor_finite(f, *t, scan_pool);
    done += t->n_bytes;
    if (progress) progress(done, total, "checked");
  }
  pack_shard_weights(f, w, scan_pool, progress);
  if (experts.count > 1) release_foreign_experts(f, c, w);
  return w;
}

std::vector<std::string> expected_tensor_names(const gguf::File& f, const ModelConfig& c) {
  const ArchSpec& a = c.spec;
  std::vector<std::string> names = {"token_embd.weight", "output_norm.weight"};
  if (!head_is_tied(f, c)) names.push_back("output.weight");
  if (has_rope_freqs(f, c)) names.push_back(kRopeFreqs);
  if (has_rope_factors_long_short(f, c)) names.insert(names.end(), {kRopeFactorsLong, kRopeFactorsShort});
  for (int32_t l = 0; l < c.n_layer; ++l) {
    std::vector<const char*> w = {"attn_norm", "attn_output", "ffn_norm"};
    if (a.mla) {
      w.insert(w.end(), {"attn_kv_a_mqa", "attn_kv_a_norm", "attn_kv_b"});
      if (c.q_lora_rank > 0) {
        w.insert(w.end(), {"attn_q_a", "attn_q_a_norm", "attn_q_b"});
      } else {
        w.push_back("attn_q");
      }
      if (!c.layer_is_dense(l) && f.find_tensor(blk(l, "exp_probs_b", "bias"))) names.push_back(blk(l, "exp_probs_b", "bias"));
    } else if (a.qkv == QkvLayout::Fused) {
      w.push_back("attn_qkv");
    } else {
      w.insert(w.end(), {"attn_q", "attn_k", "attn_v"});
    }
    if (a.qkv_bias)
      for (const char* b : {"attn_q", "attn_k", "attn_v"}) names.push_back(blk(l, b, "bias"));
    if (a.qk_norm) w.insert(w.end(), {"attn_q_norm", "attn_k_norm"});
    if (a.post_norms) w.insert(w.end(), {"post_attention_norm", "post_ffw_norm"});
    if (!c.layer_is_dense(l)) {
      w.insert(w.end(), {"ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"});
      if (a.shared_expert) w.insert(w.end(), {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"});
      if (a.shared_expert && !a.mla) w.push_back("ffn_gate_inp_shexp");
    } else if (a.ffn == FfnLayout::FusedGateUp) {
      w.insert(w.end(), {"ffn_up", "ffn_down"});
    } else {
      w.insert(w.end(), {"ffn_gate", "ffn_up", "ffn_down"});
    }
    for (const char* name : w) names.push_back(blk(l, name));
  }
  return names;
}

WeightBytes weight_bytes(const gguf::File& f, const ModelConfig& c) {
  WeightBytes b;
  b.per_layer.assign(static_cast<size_t>(c.n_layer), 0);
  b.per_layer_experts.assign(static_cast<size_t>(c.n_layer), 0);
  const std::string prefix = "blk.";
  const bool tied = head_is_tied(f, c);
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.name.rfind(prefix, 0) == 0) {
      const long layer = std::strtol(t.name.c_str() + prefix.size(), nullptr, 10);
      if (layer < 0 || layer >= c.n_layer) continue;
      b.per_layer[static_cast<size_t>(layer)] += t.n_bytes;
      for (const char* what : kStackedExperts)
        if (t.name == blk(static_cast<int32_t>(layer), what)) b.per_layer_experts[static_cast<size_t>(layer)] += t.n_bytes;
    } else if (t.name == "token_embd.weight") {
      b.embedding += t.n_bytes;
      if (tied) b.head += t.n_bytes;
    } else if ((t.name == "output.weight" && !tied) || t.name == "output_norm.weight") {
      b.head += t.n_bytes;
    }
  }
  return b;
}

WeightBytes expert_member_bytes(const WeightBytes& whole, int32_t members) {
  GLACIER_ASSERT(members >= 1 && whole.per_layer_experts.size() == whole.per_layer.size(),
                 "expert bytes counted for every layer");
  WeightBytes b = whole;
  for (size_t l = 0; l < b.per_layer.size(); ++l) {
    const uint64_t experts = b.per_layer_experts[l];
    b.per_layer_experts[l] = experts / static_cast<uint64_t>(members);
    b.per_layer[l] -= experts - b.per_layer_experts[l];
  }
  return b;
}

}  // namespace glacier::model
