// A micro-batch: chunks of tokens from several sequences (prefill chunks and decode steps mixed),
// each with its KV slot and positions, plus what the last stage must compute for it. The pipeline
// serializes exactly this between stages.
#pragma once
#include <cstdint>
#include <vector>

namespace glacier::compute {

enum class OutputKind : uint8_t {
  None = 0,    // a prefill chunk that is not the prompt's last: no logits needed
  Sample = 1,  // generate: sample the next token from the last position's logits
  Score = 2,   // score every position that has a target token (scoring and perplexity)
};

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  uint64_t seed = 0;
};

struct Chunk {
  int32_t seq = 0;        // the driver's sequence id (results are addressed by it)
  int32_t slot = 0;       // KV cache slot
  int32_t start_pos = 0;  // position of the chunk's first token
  int32_t n_tokens = 0;
  int32_t token_offset = 0;  // index of the chunk's first token in the micro-batch
  OutputKind output = OutputKind::None;
  int32_t step = 0;          // sampler step counter (draws are keyed by seed, prompt key, step)
  uint64_t prompt_key = 0;   // stable per-prompt key for the random generator
  SamplingParams sampling;
};

struct MicroBatch {
  int64_t id = 0;
  std::vector<Chunk> chunks;
  std::vector<int32_t> tokens;   // all tokens, chunk after chunk
  std::vector<int32_t> targets;  // per token: the token it should predict (Score), or -1

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  void clear() {
    chunks.clear();
    tokens.clear();
    targets.clear();
  }
};

// What the last stage sends back for one chunk.
struct ChunkResult {
  int32_t seq = 0;
  int32_t token = -1;     // Sample: the chosen token
  float logprob = 0.0f;   // Sample: its log-probability under the model
  int32_t first_target = 0;  // Score: index of this chunk's entries in the target arrays below
  int32_t n_targets = 0;
  int32_t non_finite = 0;    // 1: NaN/Inf in this chunk's hidden state or logits (the prompt fails)
};

struct MicroBatchResult {
  int64_t id = 0;
  std::vector<ChunkResult> chunks;
  std::vector<float> target_logprobs;  // Score: log p(target) per scored position
  std::vector<uint8_t> target_greedy;  // Score: 1 when the target was the argmax
  void clear() {
    chunks.clear();
    target_logprobs.clear();
    target_greedy.clear();
  }
};

}  // namespace glacier::compute
