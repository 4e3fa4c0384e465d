// The mixture-of-experts feed-forward block of a layer: router softmax (or sigmoid) over all experts, top-k per
// token, each expert run on the tokens routed to it, weighted sum in top-k order, plus the optional
// shared expert. Routing is per token, so a token's result does not depend on the rest of the batch.
// Under expert parallelism each member of an expert group runs only its own experts, and the group
// gathers the weighted outputs before the same ordered sum (bitwise the result of one rank).
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

 private:
  void route(const float* router_logits, const std::vector<float>& selection_bias, int32_t t);
  // Fills the (token, top-k rank) slots of per_rank_ that other members computed.
  void gather_from_group(int32_t n);

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
  std::vector<float> mine_, gathered_;  // [max_tokens x k x n_embd] each: this member's slots, every member's
  std::vector<size_t> counts_;          // floats each member contributes
};

}  // namespace glacier::compute
