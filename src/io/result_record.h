// What a finished request and a pipeline trace event look like on their way to the output files.
// Plain data: the app fills them, the JSONL/HDF5 writers and glacier_trace read them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace glacier::io {

constexpr int32_t kNoTokenId = -1;  // "no value" in a token id list (the first prompt token's alternatives)

struct ResultRecord {
  std::string id;
  int64_t index = 0;            // the prompt's 0-based order in the input: output order
  int64_t sample = 0;           // which of the prompt's n samples (0..n-1); rows of one prompt in this order
  std::string status = "ok";    // "ok" | "error"
  std::string error;            // set when status == "error"
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> tokens;  // generated tokens (score mode: the continuation's tokens)
  std::string text;             // raw bytes; may end inside a UTF-8 character. Both outputs repair it
                                // to valid UTF-8 (io/utf8.h); HDF5's text_bytes keeps these bytes.
  std::vector<float> logprobs;  // one per entry of `tokens`
  // Generate rows that asked for top_logprobs: per generated token the top_logprobs most likely tokens,
  // best first (ties: lower id first), row-major [tokens x top_logprobs]; their log-probs are under the
  // same distribution as `logprobs`. 0 and empty when none were asked.
  int32_t top_logprobs = 0;
  std::vector<int32_t> top_ids;
  std::vector<float> top_values;
  // Prompt log-probs (vLLM's prompt_logprobs k, 0..20; -1 when the row carries none: not asked, or a
  // sample after the prompt's first, whose row has them): per prompt token, its log-prob given the
  // tokens before it (of the raw logits, as --mode score gives it) and the k most likely tokens there,
  // best first, ties by lower id, [prompt tokens x k]. The first token has no value: NaN and kNoTokenId.
  int32_t prompt_logprobs = -1;
  std::vector<float> prompt_logprob_values;
  std::vector<int32_t> prompt_top_ids;
  std::vector<float> prompt_top_values;
  std::string finish_reason;    // "length" | "stop" | "error" | ""
  double time_to_first_token_s = 0;
  double total_time_s = 0;
  // Score mode (context + continuation): the continuation's summed log-prob and whether greedy
  // decoding would have produced exactly the continuation.
  bool score = false;
  double sum_logprob = 0;
  bool greedy = false;
  // What the row answered, for audit and --resume: the prompt's digest (app::prompt_digest) and the
  // sampling it ran with as JSON (app::sampling_json; "null" for a line that could not be read).
  std::string prompt_digest;
  std::string sampling;
};

// Verify: compute of a micro-batch that carries drafted tokens to verify; Draft: the driver's drafting
// (prompt lookup) for one micro-batch.
enum class TracePhase : uint8_t { Recv = 0, Compute = 1, Send = 2, Wait = 3, Verify = 4, Draft = 5 };
inline constexpr int kTracePhaseCount = 6;

// Whether an interval is a stage computing a micro-batch (verify steps compute like any other).
inline bool is_compute_phase(TracePhase phase) { return phase == TracePhase::Compute || phase == TracePhase::Verify; }

inline const char* trace_phase_name(TracePhase phase) {
  switch (phase) {
    case TracePhase::Recv: return "recv";
    case TracePhase::Compute: return "compute";
    case TracePhase::Send: return "send";
    case TracePhase::Wait: return "wait";
    case TracePhase::Verify: return "verify";
    case TracePhase::Draft: return "draft";
  }
  return "unknown";
}

// Job-wide counts stored as /trace attributes: the prompt tokens every replica's ring computed, and those
// whose KV rows came from the prefix cache instead (--prefix-sharing); speculative decoding's verify
// steps, the tokens drafted into them, the drafts accepted and the tokens the steps emitted, and the
// decode steps that could have drafted but did not: decode groups full, or acceptance too low (--speculate).
struct TraceCounters {
  int64_t prompt_tokens_computed = 0;
  int64_t prompt_tokens_reused = 0;
  int64_t speculation_verifications = 0;
  int64_t speculation_drafted = 0;
  int64_t speculation_accepted = 0;
  int64_t speculation_emitted = 0;
  int64_t speculation_skipped_ring_full = 0;
  int64_t speculation_skipped_low_acceptance = 0;
};

// One interval of one rank's timeline.
struct TraceRow {
  int32_t rank = 0;
  int64_t microbatch = -1;  // -1 when the interval belongs to no micro-batch
  TracePhase phase = TracePhase::Compute;
  double start = 0;  // seconds since job start
  double end = 0;
  int32_t tokens = 0;
  int64_t bytes = 0;
};

}  // namespace glacier::io
