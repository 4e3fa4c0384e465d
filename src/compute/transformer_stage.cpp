// Forward pass of a stage. Within a layer every token's keys and values are stored before any
// attention is computed, so a chunk attends to its own earlier tokens and to earlier chunks of its
// sequence (which reached this stage first: stages process micro-batches in order). What differs
// between architectures is read from cfg_.spec (the arch table) and the shard's weights.
#include "compute/transformer_stage.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compute/ffn_activation.h"
#include "kernels/dequantize.h"
#include "kernels/dispatch.h"
#include "kernels/exp_approx.h"
#include "kernels/ops.h"
#include "kernels/rope.h"
#include "util/error.h"

namespace glacier::compute {
namespace {

// YaRN's correction range end for a pair count of `n_rot_beta` turns over the original context, in
// float as llama.cpp computes it: n_rot * ln(n_ctx_orig / (beta * 2 pi)) / (2 ln base).
float yarn_corr_dim(int32_t n_rot, int32_t n_ctx_orig, float beta, float base) {
  constexpr float kPi = 3.14159265358979323846f;
  return static_cast<float>(n_rot) * std::log(static_cast<float>(n_ctx_orig) / (beta * 2.0f * kPi)) /
         (2.0f * std::log(base));
}

kernels::RopeParams rope_params(const model::ModelConfig& cfg, const std::vector<float>& freq_factors) {
  kernels::RopeParams p;
  p.n_rot = cfg.n_rot;
  p.base = cfg.rope_base;
  p.freq_scale = cfg.rope_scaling == model::RopeScaling::None ? 1.0f : cfg.rope_freq_scale;
  p.freq_factors = freq_factors.empty() ? nullptr : freq_factors.data();
  p.mscale = cfg.spec.mla ? cfg.mla_rope_attn_factor : cfg.rope_attn_factor;
  if (cfg.rope_scaling == model::RopeScaling::Yarn) {
    p.ext_factor = 1.0f;
    p.corr_low = std::max(0.0f, std::floor(yarn_corr_dim(cfg.n_rot, cfg.rope_n_ctx_orig, cfg.yarn_beta_fast, cfg.rope_base)));
    p.corr_high = std::min(static_cast<float>(cfg.n_rot - 1),
                           std::ceil(yarn_corr_dim(cfg.n_rot, cfg.rope_n_ctx_orig, cfg.yarn_beta_slow, cfg.rope_base)));
  }
  return p;
}

// The rotary frequency divisors in use: Llama 3's, or Phi-3's long factors when a sequence's context
// exceeds the original one and its short factors otherwise (llama.cpp's rule, by context per sequence).
const std::vector<float>& rope_divisors(const model::ModelConfig& cfg, const model::ShardWeights& w, int32_t n_ctx) {
  if (!w.rope_freqs.empty() || w.rope_factors_long.empty()) return w.rope_freqs;
  return n_ctx > cfg.rope_n_ctx_orig ? w.rope_factors_long : w.rope_factors_short;
}

}  // namespace

TransformerStage::TransformerStage(const model::ModelConfig& cfg, model::ShardWeights weights, int32_t n_slots,
                                   int32_t n_ctx, int32_t max_tokens, ThreadPool& pool)
    : cfg_(cfg), w_(std::move(weights)), max_tokens_(max_tokens), pool_(pool),
      kv_(cfg, w_.layer_range.size(), n_slots, n_ctx), matmul_(pool) {
  const size_t t = static_cast<size_t>(max_tokens);
  xn_.resize(t * std::max(cfg.n_embd, cfg.q_dim()));
  q_.resize(t * cfg.q_dim());
  if (cfg.spec.mla) {
    q_lora_.resize(t * cfg.q_lora_rank);
    kv_latent_.resize(t * cfg.kv_cache_row_floats());
    kv_b_.resize(static_cast<size_t>(cfg.n_head) * (cfg.nope_dim() + cfg.v_head_dim) * cfg.kv_lora_rank);
    latent_scratch_.resize(static_cast<size_t>(pool.size()) * latent_scratch_per_thread());
  } else {
    k_.resize(t * cfg.kv_dim());
    v_.resize(t * cfg.kv_dim());
  }
  attn_out_.resize(t * cfg.attn_out_dim());
  bool any_dense = false, any_moe = false;
  for (int32_t l = w_.layer_range.first; l < w_.layer_range.last; ++l) (cfg.layer_is_dense(l) ? any_dense : any_moe) = true;
  if (any_dense) {
    gate_.resize(t * cfg.n_ff);
    up_.resize(t * cfg.n_ff);
  }
  if (any_moe) moe_ = std::make_unique<MoeFfn>(cfg, max_tokens);
  tmp_.resize(t * cfg.n_embd);
  if (!cfg.spec.mla) scores_.resize(static_cast<size_t>(pool.size()) * scores_per_thread());
  rope_cs_.resize(static_cast<size_t>(cfg.n_rot));
  rope_ = rope_params(cfg, rope_divisors(cfg, w_, n_ctx));
  // Prepared activations for the widest input of any of the shard's matrices, in its type.
  for (const model::LayerWeights& L : w_.layer) {
    for (const kernels::Matrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.router,
                                     &L.gate_shexp, &L.up_shexp, &L.down_shexp, &L.shexp_gate, &L.wq_a, &L.wq_b,
                                     &L.wkv_a})
      matmul_.reserve(*m, max_tokens);
    for (const auto* experts : {&L.gate_exps, &L.up_exps, &L.down_exps})
      for (const kernels::Matrix& m : *experts)
        if (m.data) {  // the first expert this rank holds: they share one type and shape
          matmul_.reserve(m, max_tokens);
          break;
        }
  }
  matmul_.reserve(w_.output, max_tokens);
  if (cfg.spec.ffn_act == model::FfnActivation::GeluTanh) gelu_tanh_f16_table(0.0f);  // builds the table now
  token_pos_.resize(t);
  token_slot_.resize(t);
}

void TransformerStage::embed(const MicroBatch& mb, float* x) {
  GLACIER_ASSERT(w_.has_embedding, "embed() on a stage without the token embedding");
  for (int32_t i = 0; i < mb.n_tokens(); ++i)
    kernels::dequantize_row(w_.token_embd, mb.tokens[i], x + static_cast<size_t>(i) * cfg_.n_embd);
  if (cfg_.spec.scale_embedding)
    kernels::scale(std::sqrt(static_cast<float>(cfg_.n_embd)), static_cast<int64_t>(mb.n_tokens()) * cfg_.n_embd, x);
  if (cfg_.embedding_scale != 0.0f)
    kernels::scale(cfg_.embedding_scale, static_cast<int64_t>(mb.n_tokens()) * cfg_.n_embd, x);
}

// q, k, v of every token (biases, per-head q/k norms and RoPE applied); k and v go into the KV cache.
void TransformerStage::project_qkv(const model::LayerWeights& L, const float* xn, TokenRows t, int32_t li) {
  const int32_t E = cfg_.n_embd, Q = cfg_.q_dim(), KV = cfg_.kv_dim(), hd = cfg_.head_dim, n = t.n;
  matmul_.several({{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}}, xn, n, E);
  auto rope = cfg_.rope_mode == model::RopeMode::Normal ? kernels::rope_apply_normal : kernels::rope_apply_neox;
  float* rope_cos = rope_cs_.data();
  float* rope_sin = rope_cos + cfg_.n_rot / 2;
  for (int32_t i = 0; i < n; ++i) {
    float* q = q_.data() + static_cast<size_t>(i) * Q;
    float* k = k_.data() + static_cast<size_t>(i) * KV;
    float* v = v_.data() + static_cast<size_t>(i) * KV;
    if (!L.bq.empty()) {
      kernels::add(q, L.bq.data(), Q, q);
      kernels::add(k, L.bk.data(), KV, k);
      kernels::add(v, L.bv.data(), KV, v);
    }
    if (!L.q_norm.empty()) {
      for (int32_t h = 0; h < cfg_.n_head; ++h) kernels::rmsnorm(q + h * hd, L.q_norm.data(), hd, cfg_.rms_eps, q + h * hd);
      for (int32_t h = 0; h < cfg_.n_head_kv; ++h) kernels::rmsnorm(k + h * hd, L.k_norm.data(), hd, cfg_.rms_eps, k + h * hd);
    }
    kernels::rope_angles(rope_, t.pos[i], rope_cos, rope_sin);  // once for all heads
    for (int32_t h = 0; h < cfg_.n_head; ++h) rope(q + h * hd, cfg_.n_rot, rope_cos, rope_sin);
    for (int32_t h = 0; h < cfg_.n_head_kv; ++h) rope(k + h * hd, cfg_.n_rot, rope_cos, rope_sin);
    kv_.store_key(li, t.slot[i], t.pos[i], k);
    kv_.store_value(li, t.slot[i], t.pos[i], v);
  }
}

// Dense FFN: out = down(act(gate . xn) * (up . xn)).
void TransformerStage::dense_ffn(const model::LayerWeights& L, const float* xn, int32_t n, float* out) {
  const int32_t E = cfg_.n_embd, F = cfg_.n_ff;
  matmul_.several({{&L.w_gate, gate_.data()}, {&L.w_up, up_.data()}}, xn, n, E);
  for (int32_t i = 0; i < n; ++i) {
    float* g = gate_.data() + static_cast<size_t>(i) * F;
    gated_activation(cfg_.spec.ffn_act, g, up_.data() + static_cast<size_t>(i) * F, F, g);
  }
  matmul_(L.w_down, gate_.data(), n, F, out);
}

// A block's output made ready to join the residual: normalised where the arch has post-norms, scaled
// where it has a residual scale (granite), then added to x.
void TransformerStage::add_to_residual(const std::vector<float>& post_norm, float* block, int32_t n, float* x) {
  const int32_t E = cfg_.n_embd;
  if (!post_norm.empty())
    for (int32_t i = 0; i < n; ++i) kernels::rmsnorm(block + i * E, post_norm.data(), E, cfg_.rms_eps, block + i * E);
  if (cfg_.residual_scale != 0.0f) kernels::scale(cfg_.residual_scale, static_cast<int64_t>(n) * E, block);
  for (int32_t i = 0; i < n; ++i) kernels::add(x + i * E, block + i * E, E, x + i * E);
}

void TransformerStage::set_expert_group(ExpertGroup* group) {
  GLACIER_ASSERT(!group || (group->size() == w_.experts.count && group->index() == w_.experts.index),
                 "expert group matches the experts the weights hold");
  GLACIER_ASSERT(group || w_.experts.count == 1, "a stage holding part of the experts has its group");
  expert_group_ = group;
  if (moe_) moe_->set_expert_group(group);
  if (!group) return;
  const size_t t = static_cast<size_t>(max_tokens_), G = static_cast<size_t>(group->size());
  const size_t cache_row = cfg_.spec.mla ? static_cast<size_t>(cfg_.kv_cache_row_floats()) : 2 * static_cast<size_t>(cfg_.kv_dim());
  member_start_.reserve(G + 1);
  member_order_.reserve(t);
  chunk_member_.reserve(t);
  chunk_rank_.reserve(t);
  member_tokens_.reserve(G);
  slot_member_.assign(static_cast<size_t>(kv_.n_slots()), -1);
  x_split_.resize(t * cfg_.n_embd);
  shared_rows_.resize(t * (cfg_.n_embd + cache_row));
}

// A member's share of a split micro-batch: each member runs attention, the dense blocks and the finishing
// of the MoE blocks for its tokens only, and sends the others its keys and values (and its MoE inputs) once
// a layer. That is one more round of messages a dense layer, and a MoE layer's second round where the
// block would not split its tokens, so the split is taken only when every member gets at least this many
// tokens. Measured on the Qwen3-MoE-shaped file over 2 members of one thread, one host: 2 tokens a member
// (4 sequences decoding) ran 1.08-1.29x faster split than not, 1 token a member (2 sequences) 0.86-0.97x.
constexpr int32_t kMinTokensAMemberToSplitLayers = 2;

// Chunks go to members whole (a chunk attends to its own earlier tokens at the same layer) and a slot's
// chunks to one member: largest first, each to the member with the fewest tokens so far (the lowest index
// on ties), so every member plans alike.
bool TransformerStage::plan_sequence_split(const MicroBatch& mb) {
  if (!expert_group_) return false;
  const int32_t G = expert_group_->size(), n_chunks = static_cast<int32_t>(mb.chunks.size());
  if (n_chunks < G || mb.n_tokens() < G * kMinTokensAMemberToSplitLayers) return false;
  chunk_rank_.resize(static_cast<size_t>(n_chunks));
  for (int32_t c = 0; c < n_chunks; ++c) chunk_rank_[static_cast<size_t>(c)] = c;
  std::stable_sort(chunk_rank_.begin(), chunk_rank_.end(),
                   [&](int32_t a, int32_t b) { return mb.chunks[static_cast<size_t>(a)].n_tokens > mb.chunks[static_cast<size_t>(b)].n_tokens; });
  chunk_member_.assign(static_cast<size_t>(n_chunks), -1);
  member_tokens_.assign(static_cast<size_t>(G), 0);
  for (const int32_t c : chunk_rank_) {
    const Chunk& chunk = mb.chunks[static_cast<size_t>(c)];
    int32_t& member = slot_member_[static_cast<size_t>(chunk.slot)];
    if (member < 0) member = static_cast<int32_t>(std::min_element(member_tokens_.begin(), member_tokens_.end()) - member_tokens_.begin());
    chunk_member_[static_cast<size_t>(c)] = member;
    member_tokens_[static_cast<size_t>(member)] += chunk.n_tokens;
  }
  for (const Chunk& chunk : mb.chunks) slot_member_[static_cast<size_t>(chunk.slot)] = -1;  // ready for the next plan
  if (*std::min_element(member_tokens_.begin(), member_tokens_.end()) < kMinTokensAMemberToSplitLayers) return false;
  ++split_micro_batches_;
  member_start_.assign(1, 0);
  member_order_.clear();
  for (int32_t j = 0; j < G; ++j) {
    for (int32_t c = 0; c < n_chunks; ++c) {
      if (chunk_member_[static_cast<size_t>(c)] != j) continue;
      const Chunk& chunk = mb.chunks[static_cast<size_t>(c)];
      for (int32_t i = 0; i < chunk.n_tokens; ++i) {
        token_pos_[member_order_.size()] = chunk.start_pos + i;
        token_slot_[member_order_.size()] = chunk.slot;
        member_order_.push_back(chunk.token_offset + i);
      }
    }
    member_start_.push_back(static_cast<int32_t>(member_order_.size()));
  }
  return true;
}

void TransformerStage::run_layers(const MicroBatch& mb, float* x) {
  const int32_t n = mb.n_tokens();
  GLACIER_ASSERT(n <= max_tokens_, "micro-batch larger than the stage's buffers");
  GLACIER_ASSERT(expert_group_ || w_.experts.count == 1, "a stage holding part of the experts has its group");
  if (expert_group_ && expert_group_->leader()) expert_group_->share_input(mb, x, cfg_.n_embd);
  for (const SlotCopy& c : mb.copies) kv_.copy_prefix(c.src_slot, c.dst_slot, c.n_pos);
  if (n == 0) return;  // a micro-batch of copies alone
  for (const Chunk& c : mb.chunks) {
    GLACIER_ASSERT(c.slot >= 0 && c.slot < kv_.n_slots(), "slot in range");
    GLACIER_ASSERT(c.start_pos >= 0 && c.start_pos + c.n_tokens <= kv_.n_ctx(), "positions within the context");
  }
  const bool split = plan_sequence_split(mb);
  if (!split) {
    for (const Chunk& c : mb.chunks)
      for (int32_t j = 0; j < c.n_tokens; ++j) {
        token_pos_[c.token_offset + j] = c.start_pos + j;
        token_slot_[c.token_offset + j] = c.slot;
      }
  }
  const int32_t E = cfg_.n_embd, O = cfg_.attn_out_dim();
  // This rank's rows: all of them, or its share of a split micro-batch, whose residual rows then go in
  // member order (x_split_). xn_ and tmp_ keep every token at its row; q, k, v and attention start at row 0.
  const int32_t me = split ? expert_group_->index() : 0;
  const int32_t first = split ? member_start_[static_cast<size_t>(me)] : 0;
  const int32_t m = split ? member_start_[static_cast<size_t>(me) + 1] - first : n;
  if (split)  // only this member's rows: the others' come back to the leader in gather_rows_to_leader
    for (int32_t p = first; p < first + m; ++p)
      std::memcpy(x_split_.data() + static_cast<size_t>(p) * E, x + static_cast<size_t>(member_order_[static_cast<size_t>(p)]) * E,
                  static_cast<size_t>(E) * sizeof(float));
  float* const residual = (split ? x_split_.data() : x) + static_cast<size_t>(first) * E;
  float* const xn = xn_.data() + static_cast<size_t>(first) * E;
  float* const block = tmp_.data() + static_cast<size_t>(first) * E;
  const TokenRows mine{token_pos_.data() + first, token_slot_.data() + first, m};
  for (int32_t li = 0; li < w_.layer_range.size(); ++li) {
    const model::LayerWeights& L = w_.layer[li];
    for (int32_t i = 0; i < m; ++i) kernels::rmsnorm(residual + i * E, L.attn_norm.data(), E, cfg_.rms_eps, xn + i * E);
    if (cfg_.spec.mla) {
      latent_attention(L, xn, mine, li);
    } else {
      project_qkv(L, xn, mine, li);
      attention(mine, li);
    }
    matmul_(L.wo, attn_out_.data(), m, O, block);
    add_to_residual(L.attn_post_norm, block, m, residual);
    for (int32_t i = 0; i < m; ++i) kernels::rmsnorm(residual + i * E, L.ffn_norm.data(), E, cfg_.rms_eps, xn + i * E);
    const bool moe = !cfg_.layer_is_dense(w_.layer_range.first + li);
    if (split) share_layer_rows(li, moe);
    if (moe && split) {
      moe_->forward_own_rows(L, xn_.data(), member_start_, tmp_.data(), matmul_);
    } else if (moe) {
      moe_->forward(L, xn_.data(), n, tmp_.data(), matmul_);
    } else {
      dense_ffn(L, xn, m, block);
    }
    add_to_residual(L.ffn_post_norm, block, m, residual);
    if (layer_hook_) layer_hook_();
  }
  if (split) gather_rows_to_leader(n, x);
}

// Member j's part, in member order: a row a token, its ffn-normed input (before a MoE block) then its keys
// and values as the cache stores them (or its latent row). Each member stores the others' keys and values,
// so every member can attend for any sequence in a later micro-batch, split or not.
void TransformerStage::share_layer_rows(int32_t li, bool with_moe_inputs) {
  const int32_t G = expert_group_->size(), me = expert_group_->index(), E = cfg_.n_embd;
  const bool mla = cfg_.spec.mla;
  const size_t inputs = with_moe_inputs ? static_cast<size_t>(E) : 0;
  const size_t cache = mla ? static_cast<size_t>(cfg_.kv_cache_row_floats()) : static_cast<size_t>(cfg_.kv_dim());
  const size_t W = inputs + (mla ? cache : 2 * cache);
  auto row = [&](int32_t p) { return shared_rows_.data() + static_cast<size_t>(p) * W; };
  const int32_t first = member_start_[static_cast<size_t>(me)], last = member_start_[static_cast<size_t>(me) + 1];
  for (int32_t p = first; p < last; ++p) {
    float* r = row(p);
    const size_t i = static_cast<size_t>(p - first);
    std::memcpy(r, xn_.data() + static_cast<size_t>(p) * E, inputs * sizeof(float));
    if (mla) {
      std::memcpy(r + inputs, kv_latent_.data() + i * cache, cache * sizeof(float));
    } else {
      std::memcpy(r + inputs, k_.data() + i * cache, cache * sizeof(float));
      std::memcpy(r + inputs + cache, v_.data() + i * cache, cache * sizeof(float));
    }
  }
  counts_from_.resize(static_cast<size_t>(G));
  for (int32_t j = 0; j < G; ++j)
    counts_from_[static_cast<size_t>(j)] = static_cast<size_t>(member_start_[static_cast<size_t>(j) + 1] - member_start_[static_cast<size_t>(j)]) * W;
  expert_group_->all_gather(row(first), counts_from_, shared_rows_.data());
  for (int32_t p = 0; p < member_start_.back(); ++p) {
    if (p >= first && p < last) continue;  // this member's own rows are in place
    const float* r = row(p);
    std::memcpy(xn_.data() + static_cast<size_t>(p) * E, r, inputs * sizeof(float));
    if (mla) {
      std::memcpy(kv_.latent_row(li, token_slot_[p], token_pos_[p]), r + inputs, cache * sizeof(float));
    } else {
      kv_.store_key(li, token_slot_[p], token_pos_[p], r + inputs);
      kv_.store_value(li, token_slot_[p], token_pos_[p], r + inputs + cache);
    }
  }
}

// The other members send their rows to the leader, which alone passes the micro-batch on.
void TransformerStage::gather_rows_to_leader(int32_t n, float* x) {
  const int32_t G = expert_group_->size(), me = expert_group_->index();
  const size_t E = static_cast<size_t>(cfg_.n_embd);
  counts_to_.assign(static_cast<size_t>(G), 0);
  counts_from_.assign(static_cast<size_t>(G), 0);
  for (int32_t j = 0; j < G; ++j) {
    const size_t rows = static_cast<size_t>(member_start_[static_cast<size_t>(j) + 1] - member_start_[static_cast<size_t>(j)]);
    if (me == 0) counts_from_[static_cast<size_t>(j)] = rows * E;  // the leader's own part keeps its place
    if (me != 0 && j == me) counts_to_[0] = rows * E;
  }
  expert_group_->all_to_all(x_split_.data() + static_cast<size_t>(member_start_[static_cast<size_t>(me)]) * E, counts_to_,
                            x_split_.data(), counts_from_);
  if (me != 0) return;
  for (int32_t p = 0; p < n; ++p)
    std::memcpy(x + static_cast<size_t>(member_order_[static_cast<size_t>(p)]) * E, x_split_.data() + static_cast<size_t>(p) * E,
                E * sizeof(float));
}

void TransformerStage::attention(TokenRows t, int32_t li) {
  const int32_t n = t.n, hd = cfg_.head_dim, Q = cfg_.q_dim();
  const int32_t group = cfg_.n_head / cfg_.n_head_kv;
  const kernels::AttendFn attend = kernels::active_kernels().attend;
  const bool slides = cfg_.layer_slides(w_.layer_range.first + li);
  // One task per (token, KV head): the query heads of a group share each key and value they read.
  // A token's cost grows with its position, so the tasks go to the threads' contiguous shares in the
  // order first, last, second, second to last, ...: every share then holds pairs of equal total cost
  // (a plain order gave the last thread of a long prefill chunk three times the first one's work).
  // Each task's arithmetic is its own, so the order changes no result.
  pool_.parallel_for(static_cast<int64_t>(n) * cfg_.n_head_kv, [&](int64_t b, int64_t e, int thread) {
    for (int64_t task = b; task < e; ++task) {
      const int32_t j = static_cast<int32_t>(task / cfg_.n_head_kv), kvh = static_cast<int32_t>(task % cfg_.n_head_kv);
      const int32_t i = j % 2 == 0 ? j / 2 : n - 1 - j / 2;
      const int32_t pos = t.pos[i], slot = t.slot[i];
      kernels::AttentionArgs a;
      a.q = q_.data() + static_cast<size_t>(i) * Q + kvh * group * hd;
      a.q_stride = hd;
      a.n_q = group;
      const size_t head_in_tile = kernels::tile_floats(kvh, hd);  // this KV head's rows: after kvh heads' rows
      a.key_tiles = kv_.key_tiles(li, slot) + head_in_tile;
      a.value_tiles = kv_.value_tiles(li, slot) + head_in_tile;
      a.tile_stride = kv_.tile_stride();
      // With a sliding window, key t is visible from pos only when pos - t < n_swa.
      a.first = slides ? std::max(0, pos - cfg_.n_swa + 1) : 0;
      a.last = pos;
      a.hd = hd;
      a.scale = cfg_.query_scale;
      a.softcap = cfg_.attn_softcap;
      a.scores = scores_.data() + static_cast<size_t>(thread) * scores_per_thread();
      a.out = attn_out_.data() + static_cast<size_t>(i) * Q + kvh * group * hd;
      a.out_stride = hd;
      attend(a);
    }
  });
}

// Latent attention with the latent cached instead of per-head keys and values. Head h's key at position t
// is [W_k,h c_t ; k_pe_t] and its value W_v,h c_t (c_t the normalised latent, W_k,h and W_v,h head h's
// k_nope and v rows of attn_kv_b), so q . k = (W_k,h^T q_nope) . c_t + q_pe . k_pe_t and the output is
// W_v,h (sum_t p_t c_t): the matrices are applied to the query and to the weighted latent, once per head,
// instead of to every cached position. The sums are ordered differently from llama.cpp's (which expands
// every position's keys), so results agree to rounding, not bitwise; each (token, head) is computed alone,
// so they do not depend on the batch or the split.
void TransformerStage::latent_attention(const model::LayerWeights& L, const float* xn, TokenRows t, int32_t li) {
  const int32_t n = t.n, E = cfg_.n_embd, H = cfg_.n_head, hd = cfg_.head_dim, nope = cfg_.nope_dim(), r = cfg_.n_rot;
  const int32_t R = cfg_.kv_lora_rank, V = cfg_.v_head_dim, Q = cfg_.q_dim(), row_w = cfg_.kv_cache_row_floats();
  const int32_t kv_b_head = nope + V;  // attn_kv_b rows per head: k_nope then v
  if (cfg_.q_lora_rank > 0) {
    const int32_t QR = cfg_.q_lora_rank;
    matmul_.several({{&L.wq_a, q_lora_.data()}, {&L.wkv_a, kv_latent_.data()}}, xn, n, E);
    for (int32_t i = 0; i < n; ++i)
      kernels::rmsnorm(q_lora_.data() + i * QR, L.q_a_norm.data(), QR, cfg_.rms_eps, q_lora_.data() + i * QR);
    matmul_(L.wq_b, q_lora_.data(), n, QR, q_.data());
  } else {
    matmul_.several({{&L.wq, q_.data()}, {&L.wkv_a, kv_latent_.data()}}, xn, n, E);
  }
  float* rope_cos = rope_cs_.data();
  float* rope_sin = rope_cos + r / 2;
  for (int32_t i = 0; i < n; ++i) {
    float* row = kv_latent_.data() + static_cast<size_t>(i) * row_w;
    kernels::rmsnorm(row, L.kv_a_norm.data(), R, cfg_.rms_eps, row);
    kernels::rope_angles(rope_, t.pos[i], rope_cos, rope_sin);
    kernels::rope_apply_normal(row + R, r, rope_cos, rope_sin);
    float* q = q_.data() + static_cast<size_t>(i) * Q;
    for (int32_t h = 0; h < H; ++h) kernels::rope_apply_normal(q + h * hd + nope, r, rope_cos, rope_sin);
    std::memcpy(kv_.latent_row(li, t.slot[i], t.pos[i]), row, static_cast<size_t>(row_w) * sizeof(float));
  }
  const int64_t kv_b_rows = static_cast<int64_t>(H) * kv_b_head;
  pool_.parallel_for(kv_b_rows, [&](int64_t b, int64_t e, int) {
    for (int64_t j = b; j < e; ++j) kernels::dequantize_row(L.wkv_b, j, kv_b_.data() + static_cast<size_t>(j) * R);
  });
  pool_.parallel_for(static_cast<int64_t>(n) * H, [&](int64_t b, int64_t e, int thread) {
    float* q_latent = latent_scratch_.data() + static_cast<size_t>(thread) * latent_scratch_per_thread();
    float* o_latent = q_latent + R;
    float* scores = o_latent + R;
    for (int64_t task = b; task < e; ++task) {
      const int32_t i = static_cast<int32_t>(task / H), h = static_cast<int32_t>(task % H);
      const int32_t pos = t.pos[i];
      const float* q = q_.data() + static_cast<size_t>(i) * Q + static_cast<size_t>(h) * hd;
      const float* w_k = kv_b_.data() + static_cast<size_t>(h) * kv_b_head * R;
      std::fill(q_latent, q_latent + R, 0.0f);
      for (int32_t d = 0; d < nope; ++d) kernels::axpy(q[d], w_k + static_cast<size_t>(d) * R, R, q_latent);
      const float* rows = kv_.latent_row(li, t.slot[i], 0);
      float max_score = -INFINITY;
      for (int32_t t = 0; t <= pos; ++t) {
        const float* c = rows + static_cast<size_t>(t) * row_w;
        const float s = (kernels::dot_f32(q_latent, c, R) + kernels::dot_f32(q + nope, c + R, r)) * cfg_.query_scale;
        scores[t] = s;
        max_score = std::max(max_score, s);
      }
      double sum = 0.0;
      for (int32_t t = 0; t <= pos; ++t) {
        scores[t] = std::exp(scores[t] - max_score);
        sum += scores[t];
      }
      const float inv_sum = static_cast<float>(1.0 / sum);
      std::fill(o_latent, o_latent + R, 0.0f);
      for (int32_t t = 0; t <= pos; ++t) kernels::axpy(scores[t] * inv_sum, rows + static_cast<size_t>(t) * row_w, R, o_latent);
      float* out = attn_out_.data() + static_cast<size_t>(i) * H * V + static_cast<size_t>(h) * V;
      const float* w_v = w_k + static_cast<size_t>(nope) * R;
      for (int32_t j = 0; j < V; ++j) out[j] = kernels::dot_f32(w_v + static_cast<size_t>(j) * R, o_latent, R);
    }
  });
}

void TransformerStage::head(const float* x, const std::vector<int32_t>& rows, float* logits) {
  GLACIER_ASSERT(w_.has_head, "head() on a stage without the output head");
  const int32_t E = cfg_.n_embd;
  const int64_t n = static_cast<int64_t>(rows.size());
  if (n == 0) return;
  for (int64_t r = 0; r < n; ++r)
    kernels::rmsnorm(x + static_cast<size_t>(rows[r]) * E, w_.output_norm.data(), E, cfg_.rms_eps, xn_.data() + r * E);
  matmul_(w_.output, xn_.data(), n, E, logits);
  if (cfg_.logit_scale != 0.0f) kernels::scale(1.0f / cfg_.logit_scale, n * cfg_.n_vocab, logits);
  if (cfg_.final_softcap > 0.0f) {
    const float cap = cfg_.final_softcap, inv_cap = 1.0f / cap;
    for (int64_t i = 0; i < n * cfg_.n_vocab; ++i) logits[i] = kernels::softcap_approx(logits[i], cap, inv_cap);
  }
}

}  // namespace glacier::compute
