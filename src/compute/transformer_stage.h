// One pipeline stage of the transformer: the token embedding (first stage), the stage's layers, and
// the final norm and output head (last stage), applied to a micro-batch. Buffers are sized once for
// the largest micro-batch, so the steady state allocates nothing.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "compute/expert_group.h"
#include "compute/kv_cache.h"
#include "compute/microbatch.h"
#include "compute/moe_ffn.h"
#include "compute/stage_matmul.h"
#include "kernels/rope.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "util/thread_pool.h"

namespace glacier::compute {

class TransformerStage {
 public:
  TransformerStage(const model::ModelConfig& cfg, model::ShardWeights weights, int32_t n_slots, int32_t n_ctx,
                   int32_t max_tokens, ThreadPool& pool);

  const model::ModelConfig& config() const { return cfg_; }
  const model::ShardWeights& weights() const { return w_; }
  int32_t max_tokens() const { return max_tokens_; }

  // x[n_tokens x n_embd] = embedding rows of the micro-batch's tokens (first stage only).
  void embed(const MicroBatch& mb, float* x);
  // Runs the micro-batch's slot copies (mb.copies) on this stage's layers, then the layers on x in
  // place, writing the micro-batch's keys and values into the KV cache.
  void run_layers(const MicroBatch& mb, float* x);
  // Expert parallelism: the group sharing this stage's experts (weights loaded with the matching
  // model::ExpertShare). Its leader hands every micro-batch it runs to the other members first, so they
  // run the same layers in step. Not owned; nullptr (the default): this stage holds every expert.
  // A micro-batch of enough sequences is split between the members by sequence (plan_sequence_split): each
  // runs attention and the dense blocks for its own share, and every member still keeps every key and value.
  void set_expert_group(ExpertGroup* group);
  // How many micro-batches this stage's expert group has split by sequence (plan_sequence_split).
  int64_t split_micro_batches() const { return split_micro_batches_; }
  // Called after each layer: the pipeline drives MPI progress there, so transfers advance while computing.
  void set_layer_hook(std::function<void()> hook) { layer_hook_ = std::move(hook); }
  // Final norm and output head (last stage only) on the rows listed in `rows`:
  // logits[i * n_vocab ...] for rows[i].
  void head(const float* x, const std::vector<int32_t>& rows, float* logits);

 private:
  // The tokens a step of a layer computes, rows 0..n of q_, k_, v_ and attn_out_: positions and KV slots.
  struct TokenRows {
    const int32_t* pos;
    const int32_t* slot;
    int32_t n;
  };
  // q, k and v of the tokens from xn (their normed rows), keys and values stored in the cache.
  void project_qkv(const model::LayerWeights& L, const float* xn, TokenRows t, int32_t layer_local);
  void attention(TokenRows t, int32_t layer_local);
  // Multi-head latent attention (deepseek2) from xn into attn_out_: see transformer_stage.cpp.
  void latent_attention(const model::LayerWeights& L, const float* xn, TokenRows t, int32_t layer_local);
  // out[n x n_embd] = the dense FFN of xn[n x n_embd].
  void dense_ffn(const model::LayerWeights& L, const float* xn, int32_t n, float* out);
  // x[n x n_embd] += block[n x n_embd] (normed and scaled first where the arch says so; block is overwritten).
  void add_to_residual(const std::vector<float>& post_norm, float* block, int32_t n, float* x);

  // Expert group: plans whether the members split this micro-batch's tokens by sequence (and counts it);
  // if so member j runs tokens [member_start_[j], member_start_[j + 1]) of member order, whose micro-batch
  // rows member_order_ lists and whose positions and slots token_pos_ and token_slot_ then hold.
  bool plan_sequence_split(const MicroBatch& mb);
  // After a layer's attention under a split: every member's keys and values (and, before a MoE block,
  // its ffn-normed rows, xn_ in member order) to every other member.
  void share_layer_rows(int32_t layer_local, bool with_moe_inputs);
  // After the layers under a split: every member's rows of x_split_ to the leader, back in micro-batch order in x.
  void gather_rows_to_leader(int32_t n, float* x);

  model::ModelConfig cfg_;
  model::ShardWeights w_;
  int32_t max_tokens_;
  ThreadPool& pool_;
  std::function<void()> layer_hook_;
  ExpertGroup* expert_group_ = nullptr;
  KvCache kv_;
  StageMatmul matmul_;
  std::unique_ptr<MoeFfn> moe_;            // MoE models only
  // Scratch, [max_tokens x width] each.
  std::vector<float> xn_, q_, k_, v_, attn_out_, gate_, up_, tmp_;
  std::vector<float> scores_;              // per thread: scores_per_thread() attention scratch
  // Latent attention: q's low-rank rows, the latent | rope-key rows, the layer's attn_kv_b as floats, and
  // per thread the absorbed query, the weighted latent and the scores over the context.
  std::vector<float> q_lora_, kv_latent_, kv_b_, latent_scratch_;
  size_t latent_scratch_per_thread() const {
    return static_cast<size_t>(2 * cfg_.kv_lora_rank) + static_cast<size_t>(kv_.n_ctx());
  }
  // Scratch of one attend call (kernels/attention.h) for a group's heads over the whole context.
  size_t scores_per_thread() const {
    return kernels::attention_scratch_floats(cfg_.n_head / cfg_.n_head_kv, kv_.n_ctx());
  }
  std::vector<int32_t> token_pos_, token_slot_;
  std::vector<int32_t> member_start_, member_order_;  // a split micro-batch (plan_sequence_split)
  int64_t split_micro_batches_ = 0;
  std::vector<int32_t> chunk_member_, chunk_rank_, member_tokens_;  // its planning scratch, a chunk or member each
  std::vector<int32_t> slot_member_;  // while planning: the member a slot's chunks go to (-1: none yet)
  std::vector<float> x_split_;      // [max_tokens x n_embd] the residual rows in member order
  std::vector<float> shared_rows_;  // [max_tokens x (n_embd + a token's cache row)] share_layer_rows' exchange
  std::vector<size_t> counts_to_, counts_from_;  // floats to and from each member in an exchange
  std::vector<float> rope_cs_;             // one token's RoPE cosines then sines
  kernels::RopeParams rope_;               // points into w_.rope_freqs
};

}  // namespace glacier::compute
