// MoE block. The weighted expert outputs of a token are summed in top-k order (best expert first)
// and the shared-expert gate is sigmoid(z) written as silu(z) / z, the forms the references use,
// so rounding matches them as closely as plain float arithmetic allows.
#include "compute/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "compute/ffn_activation.h"
#include "kernels/ops.h"
#include "util/error.h"

namespace glacier::compute {

MoeFfn::MoeFfn(const model::ModelConfig& cfg, int32_t max_tokens) : cfg_(cfg) {
  GLACIER_ASSERT(cfg.is_moe() && cfg.n_expert_used <= cfg.n_expert, "MoE block of a MoE model");
  const size_t t = static_cast<size_t>(max_tokens), k = static_cast<size_t>(cfg.n_expert_used);
  const size_t E = static_cast<size_t>(cfg.n_embd), F = static_cast<size_t>(cfg.n_ff_expert);
  logits_.resize(t * static_cast<size_t>(cfg.n_expert));
  probs_.resize(t * static_cast<size_t>(cfg.n_expert));
  chosen_.resize(t * k);
  weight_.resize(t * k);
  rows_.resize(t);
  rank_.resize(t);
  x_.resize(t * E);
  gate_.resize(t * F);
  up_.resize(t * F);
  y_.resize(t * E);
  per_rank_.resize(t * k * E);
  mine_.resize(t * k * E);
  gathered_.resize(t * k * E);
  if (cfg.n_ff_shexp > 0) {
    const size_t S = static_cast<size_t>(cfg.n_ff_shexp);
    sh_gate_.resize(t);
    sh_ff_gate_.resize(t * S);
    sh_ff_up_.resize(t * S);
    sh_out_.resize(t * E);
  }
}

// Expert probabilities (softmax over all experts, or deepseek2 V3's per-expert sigmoid), then the k
// largest (lowest id first on ties), chosen by probability plus the layer's selection bias when it has one
// (the weights stay the unbiased probabilities); optionally renormalized to sum to one, then scaled.
void MoeFfn::route(const float* router_logits, const std::vector<float>& selection_bias, int32_t t) {
  const int32_t X = cfg_.n_expert, k = cfg_.n_expert_used;
  float* p = probs_.data() + static_cast<size_t>(t) * X;
  std::memcpy(p, router_logits, static_cast<size_t>(X) * sizeof(float));
  if (cfg_.expert_gating == model::ExpertGating::Sigmoid) {
    for (int32_t e = 0; e < X; ++e) p[e] = 1.0f / (1.0f + std::exp(-p[e]));
  } else {
    kernels::softmax(p, X);
  }
  auto selection = [&](int32_t e) { return selection_bias.empty() ? p[e] : p[e] + selection_bias[e]; };
  int32_t* chosen = chosen_.data() + static_cast<size_t>(t) * k;
  float* w = weight_.data() + static_cast<size_t>(t) * k;
  for (int32_t r = 0; r < k; ++r) {
    int32_t best = -1;
    for (int32_t e = 0; e < X; ++e) {
      if (std::find(chosen, chosen + r, e) != chosen + r) continue;
      if (best < 0 || selection(e) > selection(best)) best = e;
    }
    chosen[r] = best;
    w[r] = p[best];
  }
  if (cfg_.spec.renormalize_expert_weights || cfg_.expert_weights_norm) {
    float sum = 0.0f;
    for (int32_t r = 0; r < k; ++r) sum += w[r];
    for (int32_t r = 0; r < k; ++r) w[r] /= sum;
  }
  if (cfg_.expert_weights_scale != 1.0f)
    for (int32_t r = 0; r < k; ++r) w[r] *= cfg_.expert_weights_scale;
}

namespace {

// Floats from each member, in member order, become where each member's part starts.
void counts_to_starts(std::vector<size_t>& counts) {
  size_t start = 0;
  for (size_t& c : counts) start += std::exchange(c, start);
}

}  // namespace

// Splitting the tokens adds a round of messages (the finished rows) to save the outputs a member would
// receive for tokens it does not finish: n (G-1)/G (k - k/G - 1) rows of n_embd floats a member. One
// round costs a message latency and the waits' polls, so the split is taken only when every member
// finishes a token and it saves at least this many rows (64 KiB at n_embd 4096; Mixtral's 2 experts of 8
// over 2 members save none, Qwen3-MoE's 8 of 128 over 2 members 1.5 a token).
bool MoeFfn::splits_tokens(int32_t n) const {
  if (!group_) return false;
  constexpr double kMinRowsSavedToSplit = 4.0;
  const double G = group_->size(), k = cfg_.n_expert_used;
  return n >= group_->size() && n * (G - 1) / G * (k - k / G - 1) >= kMinRowsSavedToSplit;
}

// Without a split every member finishes every token: member j sends the slots it computed to every other
// member in (token, rank) order, and they read them back in the same order.
void MoeFfn::bring_every_output(int32_t n) {
  const int32_t k = cfg_.n_expert_used, G = group_->size(), me = group_->index();
  const size_t E = static_cast<size_t>(cfg_.n_embd), slots = static_cast<size_t>(n) * k;
  counts_from_.assign(static_cast<size_t>(G), 0);
  size_t packed = 0;
  for (size_t s = 0; s < slots; ++s) {
    const int32_t computed_by = chosen_[s] % G;
    counts_from_[static_cast<size_t>(computed_by)] += E;
    if (computed_by != me) continue;
    std::memcpy(mine_.data() + packed, per_rank_.data() + s * E, E * sizeof(float));
    packed += E;
  }
  group_->all_gather(mine_.data(), counts_from_, gathered_.data());
  take_received_slots({0, n});
}

// The slots of tokens `rows` that other members computed, from gathered_: each member's part in member
// order (counts_from_ floats each), its slots in (token, rank) order. Copies only: the values summed are
// the bits their owner computed.
void MoeFfn::take_received_slots(Rows rows) {
  const int32_t k = cfg_.n_expert_used, G = group_->size(), me = group_->index();
  const size_t E = static_cast<size_t>(cfg_.n_embd);
  std::vector<size_t>& next = counts_from_;  // reused: where each member's next slot starts in gathered_
  counts_to_starts(next);
  for (size_t s = static_cast<size_t>(rows.begin) * k; s < static_cast<size_t>(rows.end) * k; ++s) {
    const auto computed_by = static_cast<size_t>(chosen_[s] % G);
    if (static_cast<int32_t>(computed_by) == me) continue;
    std::memcpy(per_rank_.data() + s * E, gathered_.data() + next[computed_by], E * sizeof(float));
    next[computed_by] += E;
  }
}

// Every member knows every token's routing (the router is replicated), so each can tell which member
// computed a slot: member i sends member j the slots of j's tokens it computed, in (token, rank) order,
// and j reads them back in the same order.
void MoeFfn::bring_outputs_of_my_tokens() {
  const int32_t k = cfg_.n_expert_used, G = group_->size(), me = group_->index();
  const size_t E = static_cast<size_t>(cfg_.n_embd);
  counts_to_.assign(static_cast<size_t>(G), 0);
  counts_from_.assign(static_cast<size_t>(G), 0);
  size_t packed = 0;
  for (int32_t j = 0; j < G; ++j) {
    const Rows rows = finished_by(j);
    for (size_t s = static_cast<size_t>(rows.begin) * k; s < static_cast<size_t>(rows.end) * k; ++s) {
      const int32_t computed_by = chosen_[s] % G;
      if (j == me && computed_by != me) counts_from_[static_cast<size_t>(computed_by)] += E;
      if (j == me || computed_by != me) continue;
      counts_to_[static_cast<size_t>(j)] += E;
      std::memcpy(mine_.data() + packed, per_rank_.data() + s * E, E * sizeof(float));
      packed += E;
    }
  }
  group_->all_to_all(mine_.data(), counts_to_, gathered_.data(), counts_from_);
  take_received_slots(finished_by(me));
}

void MoeFfn::share_finished_rows(float* out) {
  const int32_t G = group_->size();
  counts_from_.assign(static_cast<size_t>(G), 0);
  for (int32_t j = 0; j < G; ++j) {
    const Rows rows = finished_by(j);
    counts_from_[static_cast<size_t>(j)] = static_cast<size_t>(rows.end - rows.begin) * static_cast<size_t>(cfg_.n_embd);
  }
  const Rows mine = finished_by(group_->index());
  group_->all_gather(out + static_cast<size_t>(mine.begin) * cfg_.n_embd, counts_from_, out);
}

void MoeFfn::forward(const model::LayerWeights& L, const float* xn, int32_t n, float* out, StageMatmul& matmul) {
  run_my_experts(L, xn, n, matmul);
  if (!splits_tokens(n)) {
    if (group_) bring_every_output(n);
    finish(L, xn, {0, n}, out, matmul);
    return;
  }
  // Member j finishes tokens [j n / G, (j + 1) n / G): contiguous, so the finished rows lie in member order.
  const int64_t G = group_->size();
  starts_.resize(static_cast<size_t>(G) + 1);
  for (int64_t j = 0; j <= G; ++j) starts_[static_cast<size_t>(j)] = static_cast<int32_t>(j * n / G);
  bring_outputs_of_my_tokens();
  finish(L, xn, finished_by(group_->index()), out, matmul);
  share_finished_rows(out);
}

void MoeFfn::forward_own_rows(const model::LayerWeights& L, const float* xn, const std::vector<int32_t>& starts,
                              float* out, StageMatmul& matmul) {
  GLACIER_ASSERT(group_ && starts.size() == static_cast<size_t>(group_->size()) + 1 && starts.front() == 0,
                 "one share of the tokens a member of the group");
  run_my_experts(L, xn, starts.back(), matmul);
  starts_ = starts;
  bring_outputs_of_my_tokens();
  finish(L, xn, finished_by(group_->index()), out, matmul);
}

void MoeFfn::run_my_experts(const model::LayerWeights& L, const float* xn, int32_t n, StageMatmul& matmul) {
  const int32_t E = cfg_.n_embd, F = cfg_.n_ff_expert, X = cfg_.n_expert, k = cfg_.n_expert_used;
  matmul(L.router, xn, n, E, logits_.data());
  for (int32_t t = 0; t < n; ++t) route(logits_.data() + static_cast<size_t>(t) * X, L.exp_probs_b, t);
  for (int32_t e = 0; e < X; ++e) {
    if (group_ && !group_->owns(e)) continue;  // another member computes it
    int32_t m = 0;
    for (int32_t t = 0; t < n; ++t)
      for (int32_t r = 0; r < k; ++r)
        if (chosen_[static_cast<size_t>(t) * k + r] == e) {
          rows_[m] = t;
          rank_[m] = r;
          std::memcpy(x_.data() + static_cast<size_t>(m) * E, xn + static_cast<size_t>(t) * E, E * sizeof(float));
          ++m;
        }
    if (m == 0) continue;
    matmul.several({{&L.gate_exps[e], gate_.data()}, {&L.up_exps[e], up_.data()}}, x_.data(), m, E);
    for (int32_t i = 0; i < m; ++i) {
      float* g = gate_.data() + static_cast<size_t>(i) * F;
      gated_activation(cfg_.spec.ffn_act, g, up_.data() + static_cast<size_t>(i) * F, F, g);
    }
    matmul(L.down_exps[e], gate_.data(), m, F, y_.data());
    for (int32_t i = 0; i < m; ++i) {
      const size_t slot = static_cast<size_t>(rows_[i]) * k + rank_[i];
      const float* y = y_.data() + static_cast<size_t>(i) * E;
      float* dst = per_rank_.data() + slot * E;
      for (int32_t d = 0; d < E; ++d) dst[d] = y[d] * weight_[slot];
    }
  }
}

void MoeFfn::finish(const model::LayerWeights& L, const float* xn, Rows rows, float* out, StageMatmul& matmul) {
  const int32_t E = cfg_.n_embd, k = cfg_.n_expert_used;
  for (int32_t t = rows.begin; t < rows.end; ++t) {
    float* o = out + static_cast<size_t>(t) * E;
    const float* first = per_rank_.data() + static_cast<size_t>(t) * k * E;
    std::memcpy(o, first, E * sizeof(float));
    for (int32_t r = 1; r < k; ++r) kernels::add(o, first + static_cast<size_t>(r) * E, E, o);
  }
  if (cfg_.n_ff_shexp > 0)
    add_shared_expert(L, xn + static_cast<size_t>(rows.begin) * E, rows.end - rows.begin,
                      out + static_cast<size_t>(rows.begin) * E, matmul);
}

// out[n x n_embd] += the shared expert of xn[n x n_embd] (gated by sigmoid where the layer has a gate).
void MoeFfn::add_shared_expert(const model::LayerWeights& L, const float* xn, int32_t n, float* out,
                               StageMatmul& matmul) {
  if (n == 0) return;
  const int32_t E = cfg_.n_embd, S = cfg_.n_ff_shexp;
  const bool gated = L.shexp_gate.data != nullptr;  // qwen2moe's gate; deepseek2's shared experts have none
  if (gated) matmul(L.shexp_gate, xn, n, E, sh_gate_.data());
  matmul.several({{&L.gate_shexp, sh_ff_gate_.data()}, {&L.up_shexp, sh_ff_up_.data()}}, xn, n, E);
  for (int32_t t = 0; t < n; ++t) {
    float* g = sh_ff_gate_.data() + static_cast<size_t>(t) * S;
    gated_activation(cfg_.spec.ffn_act, g, sh_ff_up_.data() + static_cast<size_t>(t) * S, S, g);
  }
  matmul(L.down_shexp, sh_ff_gate_.data(), n, S, sh_out_.data());
  for (int32_t t = 0; t < n; ++t) {
    if (!gated) {
      kernels::add(out + static_cast<size_t>(t) * E, sh_out_.data() + static_cast<size_t>(t) * E, E,
                   out + static_cast<size_t>(t) * E);
      continue;
    }
    const float z = sh_gate_[t];
    const float gate = z != 0.0f ? kernels::silu(z) / z : 0.5f;
    float* s = sh_out_.data() + static_cast<size_t>(t) * E;
    kernels::scale(gate, E, s);
    kernels::add(out + static_cast<size_t>(t) * E, s, E, out + static_cast<size_t>(t) * E);
  }
}

}  // namespace glacier::compute
