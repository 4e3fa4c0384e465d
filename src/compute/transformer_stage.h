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
  void set_expert_group(ExpertGroup* group);
  // Called after each layer: the pipeline drives MPI progress there, so transfers advance while computing.
  void set_layer_hook(std::function<void()> hook) { layer_hook_ = std::move(hook); }
  // Final norm and output head (last stage only) on the rows listed in `rows`:
  // logits[i * n_vocab ...] for rows[i].
  void head(const float* x, const std::vector<int32_t>& rows, float* logits);

 private:
  void project_qkv(const model::LayerWeights& L, int32_t n, int32_t layer_local);
  void attention(const MicroBatch& mb, int32_t layer_local);
  // Multi-head latent attention (deepseek2) from xn_ into attn_out_: see transformer_stage.cpp.
  void latent_attention(const model::LayerWeights& L, int32_t n, int32_t layer_local);
  void dense_ffn(const model::LayerWeights& L, int32_t n);
  void add_to_residual(const std::vector<float>& post_norm, int32_t n, float* x);

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
  std::vector<float> rope_cs_;             // one token's RoPE cosines then sines
  kernels::RopeParams rope_;               // points into w_.rope_freqs
};

}  // namespace glacier::compute
