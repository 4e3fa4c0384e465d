// Views of one rank's shard of the weights: the layers [first, last) it owns, plus the token
// embedding on the first stage and the final norm and output head on the last. Only the shard's
// tensors are looked up, checked and touched.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_fwd.h"
#include "kernels/matmul.h"
#include "model/model_config.h"

namespace glacier {
class ThreadPool;
}

namespace glacier::model {

struct LayerRange {
  int32_t first = 0;
  int32_t last = 0;  // exclusive
  int32_t size() const { return last - first; }
};

// One layer's weights. Fused tensors (phi3's attn_qkv, gate|up ffn_up) are split into row views here,
// so compute sees the same matrices for every architecture.
struct LayerWeights {
  std::vector<float> attn_norm;
  kernels::Matrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;          // projection biases; empty when the arch has none
  std::vector<float> q_norm, k_norm;      // per-head RMSNorm weights [head_dim]; empty when none
  // Latent attention (deepseek2): q's low-rank pair and its norm (unset with a plain wq), the latent plus
  // rope-key projection, the latent's norm, and the latent's expansion to per-head k_nope | v rows.
  kernels::Matrix wq_a, wq_b, wkv_a, wkv_b;
  std::vector<float> q_a_norm, kv_a_norm;
  std::vector<float> attn_post_norm;     // RMSNorm of the attention output (gemma2); empty when none
  std::vector<float> ffn_norm;
  std::vector<float> ffn_post_norm;      // RMSNorm of the FFN output (gemma2); empty when none
  kernels::Matrix w_gate, w_up, w_down;   // dense FFN (unset in a MoE layer)
  // MoE: the router [n_expert rows x n_embd] and one view per expert into the 3-D expert tensors.
  kernels::Matrix router;
  std::vector<kernels::Matrix> gate_exps, up_exps, down_exps;
  // Shared expert (qwen2moe) and its one-row gate; unset when the arch has none.
  kernels::Matrix gate_shexp, up_shexp, down_shexp, shexp_gate;  // shexp_gate unset: ungated (deepseek2)
  std::vector<float> exp_probs_b;  // deepseek2 V3: bias added to the expert probabilities for selection only; empty: none
};

// Which experts of the MoE layers a rank holds under expert parallelism (--expert-parallel): expert e
// when e % count == index. {0, 1} holds them all.
struct ExpertShare {
  int32_t index = 0;
  int32_t count = 1;
  bool owns(int32_t expert) const { return expert % count == index; }
};

struct ShardWeights {
  LayerRange layer_range;           // the model layers [first, last) this shard holds
  bool has_embedding = false;
  bool has_head = false;
  kernels::Matrix token_embd;      // [n_vocab rows x n_embd]
  std::vector<LayerWeights> layer;  // layer[i] is model layer layer_range.first + i
  std::vector<float> output_norm;
  std::vector<float> rope_freqs;   // rope_freqs.weight (n_rot / 2 divisors) on a shard with layers; empty: none
  // Phi-3 LongRoPE's rope_factors_long/short.weight (n_rot / 2 divisors each) on a shard with layers; empty: none.
  std::vector<float> rope_factors_long, rope_factors_short;
  kernels::Matrix output;          // [n_vocab rows x n_embd]
  uint64_t bytes = 0;              // weight bytes the shard maps
  ExpertShare experts;             // the MoE layers' experts this shard holds (the others' matrices are unset)
  uint64_t expert_bytes = 0;       // bytes of the experts it holds (of `bytes`), and of every expert of its layers
  uint64_t all_expert_bytes = 0;
  std::vector<const gguf::TensorInfo*> tensors;  // every tensor (or held expert's slice) the shard maps, in load order
  // With experts.count > 1: one entry a held expert of each 3-D expert tensor, describing only that expert's
  // rows, so the finite scan, the prefetch and the packing touch only them (shared_ptr: TensorInfo is
  // incomplete here).
  std::vector<std::shared_ptr<const gguf::TensorInfo>> expert_slices;
  // Owners of the matrices' packed copies (Matrix::packed; see weight_packing.h).
  struct FreeBuffer {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<uint8_t, FreeBuffer>> packed_storage;
};

// Called on the loading thread after each tensor is checked and each matrix packed: bytes done of the
// shard's total, and which pass ("checked", "packed"); a watchdog's sign of life during a long load.
using LoadProgress = std::function<void(uint64_t done_bytes, uint64_t total_bytes, const char* pass)>;

// Looks up and checks (type, shape) the shard's tensors, scans them for NaN and Inf (finite_scan.h) and
// packs the Q8_0/Q4_0 matrices (weight_packing.h), on `scan_pool`'s threads (nullptr: on the calling
// thread); throws InputError naming the file, the tensor, the expected and the found shape, type or values.
// Of the MoE layers' experts only those `experts` names are viewed, scanned and packed.
ShardWeights load_shard(const gguf::File& file, const ModelConfig& cfg, LayerRange layers, bool has_embedding,
                        bool has_head, ThreadPool* scan_pool = nullptr, const LoadProgress& progress = {},
                        ExpertShare experts = {});

// Every tensor load_shard maps over all layers with the embedding and the head, in no set order: a file
// tensor outside this list would be ignored (file_coverage.h refuses it).
std::vector<std::string> expected_tensor_names(const gguf::File& file, const ModelConfig& cfg);

// Weight bytes of each layer, and of the embedding and head parts (for partitioning by bytes).
struct WeightBytes {
  std::vector<uint64_t> per_layer;
  std::vector<uint64_t> per_layer_experts;  // of per_layer: the stacked experts, which expert groups share out
  uint64_t embedding = 0;
  uint64_t head = 0;
};
WeightBytes weight_bytes(const gguf::File& file, const ModelConfig& cfg);

// What each member of an expert group of `members` ranks holds of the layers (--expert-parallel): the
// layer's other tensors and 1/members of its experts (members divides the expert count, as checked).
WeightBytes expert_member_bytes(const WeightBytes& whole, int32_t members);

// The kernels' weight type of a GGUF tensor, or InputError naming it and listing the supported types.
kernels::WeightType weight_type_of(const gguf::File& file, const gguf::TensorInfo& t);

}  // namespace glacier::model
