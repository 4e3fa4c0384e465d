// Forward pass of a stage. Within a layer every token's keys and values are stored before any
// attention is computed, so a chunk attends to its own earlier tokens and to earlier chunks of its
// sequence (which reached this stage first: stages process micro-batches in order).
#include "compute/transformer_stage.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/dequantize.h"
#include "kernels/ops.h"
#include "kernels/rope.h"
#include "util/error.h"

namespace glacier::compute {

TransformerStage::TransformerStage(const model::ModelConfig& cfg, model::ShardWeights weights, int32_t n_slots,
                                   int32_t n_ctx, int32_t max_tokens, ThreadPool& pool)
    : cfg_(cfg), w_(std::move(weights)), max_tokens_(max_tokens), pool_(pool),
      kv_(w_.layers.size(), n_slots, n_ctx, cfg.kv_dim()) {
  const size_t t = static_cast<size_t>(max_tokens);
  xn_.resize(t * std::max(cfg.n_embd, cfg.q_dim()));
  q_.resize(t * cfg.q_dim());
  k_.resize(t * cfg.kv_dim());
  v_.resize(t * cfg.kv_dim());
  attn_out_.resize(t * cfg.q_dim());
  gate_.resize(t * cfg.n_ff);
  up_.resize(t * cfg.n_ff);
  tmp_.resize(t * cfg.n_embd);
  scores_.resize(static_cast<size_t>(pool.size()) * n_ctx);
  // Prepared activations for the widest input of any of the shard's matrices, in its type.
  size_t act = 0;
  auto fit = [&](const kernels::Matrix& m) {
    if (m.data) act = std::max(act, kernels::activation_bytes(m.type, max_tokens, m.cols));
  };
  for (const model::LayerWeights& L : w_.layer)
    for (const kernels::Matrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) fit(*m);
  fit(w_.output);
  act_storage_.resize(act);
  token_pos_.resize(t);
  token_slot_.resize(t);
}

void TransformerStage::matmul(const kernels::Matrix& w, const float* x, int64_t n_rows, int64_t ldx, float* y) {
  kernels::PreparedActivations a =
      kernels::prepare_activations(w.type, x, n_rows, w.cols, ldx, act_storage_.data());
  pool_.parallel_for(w.rows, [&](int64_t b, int64_t e, int) { kernels::matmul(w, a, y, w.rows, b, e); });
}

void TransformerStage::embed(const MicroBatch& mb, float* x) {
  GLACIER_ASSERT(w_.has_embedding, "embed() on a stage without the token embedding");
  for (int32_t i = 0; i < mb.n_tokens(); ++i)
    kernels::dequantize_row(w_.token_embd, mb.tokens[i], x + static_cast<size_t>(i) * cfg_.n_embd);
}

void TransformerStage::run_layers(const MicroBatch& mb, float* x) {
  const int32_t n = mb.n_tokens();
  GLACIER_ASSERT(n <= max_tokens_, "micro-batch larger than the stage's buffers");
  for (const Chunk& c : mb.chunks) {
    GLACIER_ASSERT(c.slot >= 0 && c.slot < kv_.n_slots(), "slot in range");
    GLACIER_ASSERT(c.start_pos >= 0 && c.start_pos + c.n_tokens <= kv_.n_ctx(), "positions within the context");
    for (int32_t j = 0; j < c.n_tokens; ++j) {
      token_pos_[c.token_offset + j] = c.start_pos + j;
      token_slot_[c.token_offset + j] = c.slot;
    }
  }
  const int32_t E = cfg_.n_embd, F = cfg_.n_ff, Q = cfg_.q_dim(), KV = cfg_.kv_dim(), hd = cfg_.head_dim;
  for (int32_t li = 0; li < w_.layers.size(); ++li) {
    const model::LayerWeights& L = w_.layer[li];
    for (int32_t i = 0; i < n; ++i) kernels::rmsnorm(x + i * E, L.attn_norm.data(), E, cfg_.rms_eps, xn_.data() + i * E);
    matmul(L.wq, xn_.data(), n, E, q_.data());
    matmul(L.wk, xn_.data(), n, E, k_.data());
    matmul(L.wv, xn_.data(), n, E, v_.data());
    for (int32_t i = 0; i < n; ++i) {
      const int32_t pos = token_pos_[i];
      auto rope = cfg_.rope_mode == model::RopeMode::Normal ? kernels::rope_normal : kernels::rope_neox;
      for (int32_t h = 0; h < cfg_.n_head; ++h) rope(q_.data() + i * Q + h * hd, cfg_.n_rot, pos, cfg_.rope_base);
      for (int32_t h = 0; h < cfg_.n_head_kv; ++h) rope(k_.data() + i * KV + h * hd, cfg_.n_rot, pos, cfg_.rope_base);
      std::memcpy(kv_.key(li, token_slot_[i], pos), k_.data() + i * KV, KV * sizeof(float));
      std::memcpy(kv_.value(li, token_slot_[i], pos), v_.data() + i * KV, KV * sizeof(float));
    }
    attention(mb, li);
    matmul(L.wo, attn_out_.data(), n, Q, tmp_.data());
    for (int32_t i = 0; i < n; ++i) kernels::add(x + i * E, tmp_.data() + i * E, E, x + i * E);
    for (int32_t i = 0; i < n; ++i) kernels::rmsnorm(x + i * E, L.ffn_norm.data(), E, cfg_.rms_eps, xn_.data() + i * E);
    matmul(L.w_gate, xn_.data(), n, E, gate_.data());
    matmul(L.w_up, xn_.data(), n, E, up_.data());
    for (int32_t i = 0; i < n; ++i) kernels::swiglu(gate_.data() + i * F, up_.data() + i * F, F, gate_.data() + i * F);
    matmul(L.w_down, gate_.data(), n, F, tmp_.data());
    for (int32_t i = 0; i < n; ++i) kernels::add(x + i * E, tmp_.data() + i * E, E, x + i * E);
    if (layer_hook_) layer_hook_();
  }
}

void TransformerStage::attention(const MicroBatch& mb, int32_t li) {
  const int32_t n = mb.n_tokens(), hd = cfg_.head_dim, Q = cfg_.q_dim();
  const int32_t group = cfg_.n_head / cfg_.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int32_t n_ctx = kv_.n_ctx();
  pool_.parallel_for(static_cast<int64_t>(n) * cfg_.n_head, [&](int64_t b, int64_t e, int thread) {
    float* scores = scores_.data() + static_cast<size_t>(thread) * n_ctx;
    for (int64_t task = b; task < e; ++task) {
      const int32_t i = static_cast<int32_t>(task / cfg_.n_head), h = static_cast<int32_t>(task % cfg_.n_head);
      const int32_t pos = token_pos_[i], slot = token_slot_[i], kvh = h / group;
      const float* q = q_.data() + static_cast<size_t>(i) * Q + h * hd;
      for (int32_t t = 0; t <= pos; ++t) {
        const float* k = kv_.key(li, slot, t) + kvh * hd;
        float s = 0.0f;
        for (int32_t d = 0; d < hd; ++d) s += q[d] * k[d];
        scores[t] = s * scale;
      }
      kernels::softmax(scores, pos + 1);
      float* out = attn_out_.data() + static_cast<size_t>(i) * Q + h * hd;
      std::fill(out, out + hd, 0.0f);
      for (int32_t t = 0; t <= pos; ++t) kernels::axpy(scores[t], kv_.value(li, slot, t) + kvh * hd, hd, out);
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
  matmul(w_.output, xn_.data(), n, E, logits);
}

}  // namespace glacier::compute
