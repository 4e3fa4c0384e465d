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
  // speculative decoding: a decode step's token followed by drafted tokens; row j (step + j) accepts or
  // replaces the draft after it (Sampler::verify), and the driver keeps the drafts up to the first refused
  Verify = 3,
};

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  uint64_t seed = 0;
  float repetition_penalty = 1.0f;  // 1 = off; over the prompt's and the output's tokens
  float presence_penalty = 0.0f;    // 0 = off; over the output's tokens
  float frequency_penalty = 0.0f;   // 0 = off; over the output's tokens
  int32_t min_tokens = 0;           // before this many output tokens, the sequence's min-tokens ids are masked
  int32_t top_logprobs = 0;         // alternatives returned per sampled token (0..kMaxTopLogprobs; top_logprobs.h)

  // Whether the sampler needs the sequence's token counts (the last stage keeps them per KV slot).
  bool penalized() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

// One logit_bias entry: added to the token's logit before sampling.
struct TokenBias {
  int32_t token = 0;
  float bias = 0.0f;
};

// Per micro-batch bounds of the sequence settings a first chunk carries (they size the receive buffers);
// one sequence's own settings are bounded by kMaxLogitBiasEntries and kMaxMinTokensMask.
constexpr int32_t kMaxLogitBiasEntries = 1024;
constexpr int32_t kMaxStopTokenIds = 1024;
constexpr int32_t kMaxMinTokensMask = 2048;  // stop_token_ids plus the model's end-of-generation ids
constexpr int32_t kMaxBiasesPerMicroBatch = 4 * kMaxLogitBiasEntries;
constexpr int32_t kMaxMaskPerMicroBatch = 2 * kMaxMinTokensMask;
// n samples of one prompt: at most this many (each holds a KV slot). A micro-batch carries at most
// kMaxCopiesPerMicroBatch slot copies and its results at most kMaxExtraSamplesPerMicroBatch draws
// beyond each chunk's first (they size the receive buffers; the scheduler keeps within them).
constexpr int32_t kMaxSamplesPerPrompt = 128;
constexpr int32_t kMaxCopiesPerMicroBatch = 4 * kMaxSamplesPerPrompt;
constexpr int32_t kMaxExtraSamplesPerMicroBatch = 4 * kMaxSamplesPerPrompt;

// Before a micro-batch's chunks run, every stage copies the first n_pos positions of src_slot's keys and
// values into dst_slot (and the last stage the slot's logit state): the prompt one prefill computed,
// shared by the other samples of that prompt.
struct SlotCopy {
  int32_t src_slot = 0;
  int32_t dst_slot = 0;
  int32_t n_pos = 0;
};

struct Chunk {
  int32_t seq = 0;        // the driver's handle of the sequence (echoed in its result)
  int32_t slot = 0;       // KV cache slot
  int32_t start_pos = 0;  // position of the chunk's first token
  int32_t n_tokens = 0;
  int32_t token_offset = 0;  // index of the chunk's first token in the micro-batch
  OutputKind output = OutputKind::None;
  int32_t step = 0;          // sampler step counter (draws are keyed by seed, prompt key, step)
  uint64_t prompt_key = 0;   // stable per-prompt key for the random generator
  SamplingParams sampling;
  // A generate sequence's first chunk (start_pos 0, or starts_sequence) carries its logit biases and the
  // ids min_tokens masks, as ranges of the micro-batch's `biases` and `min_mask`; the last stage keeps them
  // per KV slot, so later chunks carry none (n = 0).
  int32_t first_bias = 0;
  int32_t n_biases = 0;
  int32_t first_mask = 0;
  int32_t n_mask = 0;
  // Sample: how many tokens to draw from the row, draw j keyed by sample_stream_key(prompt_key, j)
  // (sampler.h): the first samples of a prompt's n, from one prefill.
  int32_t n_samples = 1;
  // The sequence's first chunk though start_pos > 0: its first start_pos rows were copied from another
  // prompt's slot (a shared prefix), so the last stage starts the slot's logit state afresh here.
  bool starts_sequence = false;
  // Generate chunks of a prompt that asked for prompt log-probs: its positions with a target (the next
  // prompt token) are scored like a Score chunk's, each with this many alternatives (0..kMaxTopLogprobs).
  int32_t target_top = 0;
};

struct MicroBatch {
  int64_t id = 0;
  std::vector<Chunk> chunks;
  std::vector<int32_t> tokens;   // all tokens, chunk after chunk
  std::vector<int32_t> targets;  // per token: the token it should predict (Score), or -1
  std::vector<TokenBias> biases; // first chunks' logit_bias entries (Chunk::first_bias, n_biases)
  std::vector<int32_t> min_mask; // first chunks' min_tokens ids (Chunk::first_mask, n_mask)
  std::vector<SlotCopy> copies;  // done before the chunks, in order

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  void clear() {
    copies.clear();
    chunks.clear();
    tokens.clear();
    targets.clear();
    biases.clear();
    min_mask.clear();
  }
};

// What the last stage sends back for one chunk.
// Verify: row 0's choice is token/logprob, rows 1..n-1 are the n_extra draws at first_sample, and the
// alternatives are n_top per row, row after row from first_top; non_finite is 1 + the first row found
// non-finite (a later row's fault does not fail a sequence that rejects the draft before it).
struct ChunkResult {
  int32_t seq = 0;
  int32_t token = -1;     // Sample: the chosen token
  float logprob = 0.0f;   // Sample: its log-probability (sampler.h says under which distribution)
  int32_t first_target = 0;  // Score: index of this chunk's entries in the target arrays below
  int32_t n_targets = 0;
  int32_t non_finite = 0;    // 1: NaN/Inf in this chunk's hidden state or logits (the prompt fails)
  int32_t first_top = 0;     // Sample: index of this chunk's alternatives in the top arrays below
  int32_t n_top = 0;         // Sample: how many (sampling.top_logprobs, or the vocabulary if smaller)
  int32_t first_sample = 0;  // Sample with n_samples > 1: draws 1..n-1 in the sample arrays below
  int32_t n_extra = 0;
  // Chunk::target_top > 0: the targets' alternatives in the top arrays, n_target_top per target, target
  // after target (log-probs of the raw logits, as the targets' own).
  int32_t first_target_top = 0;
  int32_t n_target_top = 0;
};

struct MicroBatchResult {
  int64_t id = 0;
  std::vector<ChunkResult> chunks;
  std::vector<float> target_logprobs;  // log p(target) per scored position (Score, and prompt log-probs)
  std::vector<uint8_t> target_greedy;  // Score: 1 when the target was the argmax
  std::vector<int32_t> top_ids;        // Sample: the most likely tokens, best first (compute/top_logprobs.h)
  std::vector<float> top_logprobs;     // Sample: their log-probs, under the chosen token's distribution
  std::vector<int32_t> sample_tokens;  // draws beyond a chunk's first (ChunkResult::first_sample, n_extra)
  std::vector<float> sample_logprobs;
  void clear() {
    sample_tokens.clear();
    sample_logprobs.clear();
    chunks.clear();
    target_logprobs.clear();
    target_greedy.clear();
    top_ids.clear();
    top_logprobs.clear();
  }
};

}  // namespace glacier::compute
