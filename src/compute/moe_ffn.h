// The mixture-of-experts feed-forward block of a layer: router softmax (or sigmoid) over all experts, top-k per
// token, each expert run on the tokens routed to it, weighted sum in top-k order, plus the optional
// shared expert. Routing is per token, so a token's result does not depend on the rest of the batch.
// Under expert parallelism each member of an expert group runs only its own experts for every token. In
// a micro-batch large enough, an all-to-all brings each token's weighted outputs to the member that
// finishes it (the ordered sum and the shared expert, for its share of the tokens), and an all-gather of
// the finished rows gives every member the block's output; in a small one (one round of messages instead
// of two) every member gathers every output and finishes every token. When the stage splits a micro-batch
// by sequence over the members (TransformerStage), each finishes its own tokens and keeps them. All are
// bitwise one rank's.
#pragma once
#include <cstdint>
#include <vector>

#include "compute/expert_group.h"
#include "compute/stage_matmul.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace glacier::compute {

class MoeFfn {
 public:
  // Buffers for up to max_tokens rows, sized here (forward() allocates nothing).
  MoeFfn(const model::ModelConfig& cfg, int32_t max_tokens);
  // The group whose members share the experts (nullptr: this rank holds them all). Not owned.
  void set_expert_group(ExpertGroup* group) { group_ = group; }
  // out[n x n_embd] = the MoE block applied to xn[n x n_embd] (the ffn-normed activations).
  void forward(const model::LayerWeights& L, const float* xn, int32_t n, float* out, StageMatmul& matmul);
  // The same under a split by sequence: member j holds tokens [starts[j], starts[j + 1]) of xn's rows and
  // finishes them, so only this member's rows of out are written and no finished rows are shared.
  void forward_own_rows(const model::LayerWeights& L, const float* xn, const std::vector<int32_t>& starts, float* out,
                        StageMatmul& matmul);

 private:
  struct Rows {
    int32_t begin, end;
  };
  void route(const float* router_logits, const std::vector<float>& selection_bias, int32_t t);
  // Router, top-k and this rank's experts for every token: per_rank_'s slots of the experts it holds.
  void run_my_experts(const model::LayerWeights& L, const float* xn, int32_t n, StageMatmul& matmul);
  // The routed sum and the shared expert of tokens `rows` into out (their rows at their indices).
  void finish(const model::LayerWeights& L, const float* xn, Rows rows, float* out, StageMatmul& matmul);
  // Whether the group splits the finishing of a micro-batch of n tokens (else every member finishes all).
  bool splits_tokens(int32_t n) const;
  // The tokens `member` finishes when they are split (starts_).
  Rows finished_by(int32_t member) const { return {starts_[static_cast<size_t>(member)], starts_[static_cast<size_t>(member) + 1]}; }
  // Fills the (token, top-k rank) slots that other members computed, every token's.
  void bring_every_output(int32_t n);
  // Fills the (token, top-k rank) slots of this member's tokens that other members computed, and sends
  // them the slots of theirs it computed.
  void bring_outputs_of_my_tokens();
  // Both: the slots of tokens `rows` that other members computed, from what the collective received.
  void take_received_slots(Rows rows);
  // Every member's finished rows of out[n x n_embd] to every other member.
  void share_finished_rows(float* out);
  void add_shared_expert(const model::LayerWeights& L, const float* xn, int32_t n, float* out, StageMatmul& matmul);

  const model::ModelConfig cfg_;
  std::vector<float> logits_, probs_;  // [max_tokens x n_expert] router logits and softmax
  std::vector<int32_t> chosen_;      // [max_tokens x k] expert ids, best first
  std::vector<float> weight_;        // [max_tokens x k]
  std::vector<int32_t> rows_;        // tokens routed to the current expert
  std::vector<int32_t> rank_;        // their top-k rank for that expert
  std::vector<float> x_, gate_, up_, y_;  // gathered rows and the expert's intermediates
  std::vector<float> per_rank_;      // [max_tokens x k x n_embd] weighted expert outputs
  std::vector<float> sh_gate_, sh_ff_gate_, sh_ff_up_, sh_out_;  // shared expert
  ExpertGroup* group_ = nullptr;
  std::vector<float> mine_, gathered_;  // [max_tokens x k x n_embd] each: slots sent, slots received
  std::vector<size_t> counts_to_, counts_from_;  // floats this member sends each member, receives from each
  std::vector<int32_t> starts_;  // split finishing: member j finishes tokens [starts_[j], starts_[j + 1])
};

}  // namespace glacier::compute
