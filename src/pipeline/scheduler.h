// The driver's scheduler: admits sequences into KV slots, packs prefill chunks and decode steps into
// micro-batches of about `ubatch` tokens, keeps several micro-batches in the ring, and applies the
// results that come back (sampled tokens, target log-probs) until every sequence has finished.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "compute/microbatch.h"
#include "pipeline/draft_source.h"
#include "pipeline/prefix_index.h"
#include "pipeline/prompt_lookup.h"
#include "pipeline/ring.h"
#include "pipeline/speculation_policy.h"

namespace glacier::pipeline {

enum class SeqMode { Generate, Score };
enum class FinishReason { Length, Stop, Error };

struct SequenceRequest {
  int32_t seq = 0;                // caller's index; results are reported by it (with the sample index)
  int32_t row = 0;                // the caller's row of seq it answers (reported as `sample`; sample j as row + j)
  std::vector<int32_t> tokens;    // the prompt (BOS included), for Score also the continuation
  // Score: per position, the token it should predict, or -1. Generate with prompt log-probs: the prompt's
  // positions but its last, each the next prompt token (scored as in Score, prompt_top alternatives each).
  std::vector<int32_t> targets;
  int32_t prompt_top = 0;
  SeqMode mode = SeqMode::Generate;
  int32_t max_new_tokens = 0;
  compute::SamplingParams sampling;
  uint64_t prompt_key = 0;
  // Generate: sent once, with the first chunk (at most kMaxLogitBiasEntries and kMaxMinTokensMask).
  std::vector<compute::TokenBias> logit_bias;
  std::vector<int32_t> min_tokens_mask;  // ids masked before sampling.min_tokens outputs (empty: none)
  // Generate: n continuations of one prefill, each in its own KV slot (1..kMaxSamplesPerPrompt, at most
  // the slots). The prompt is computed once, in sample 0's slot; the first tokens of all n are drawn from
  // its last row, then its KV (positions of the prompt) is copied into the other samples' slots on every
  // stage. Sample j draws from the stream sample_stream_key(prompt_key, j).
  int32_t n_samples = 1;
};

struct SequenceOutcome {
  int32_t seq = 0;
  int32_t sample = 0;  // 0..n_samples-1
  std::vector<int32_t> generated;
  std::vector<float> logprobs;
  // Per generated token, sampling.top_logprobs alternatives (fewer only for a smaller vocabulary),
  // best first: [generated x k], row after row.
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
  std::vector<float> target_logprobs;
  std::vector<uint8_t> target_greedy;
  // Generate with prompt log-probs (the prompt's first sample only): per target, its log-prob in
  // target_logprobs and its prompt_top alternatives here, best first, [targets x prompt_top].
  std::vector<int32_t> target_top_ids;
  std::vector<float> target_top_logprobs;
  FinishReason finish = FinishReason::Length;
  std::string error;
  double time_to_first_token = 0.0;  // seconds from admission
  double total_time = 0.0;
};

struct SchedulerOptions {
  int32_t n_slots = 1;
  int32_t n_ctx = 512;
  int32_t ubatch = 512;         // tokens per micro-batch at most
  int32_t max_in_flight = 1;    // micro-batches in the ring at once
  int32_t decode_groups = 1;    // decode sequences are split into this many groups
  // n samples of a prompt share its one prefill (KV copied to the others' slots); false: each sample
  // computes the prompt itself (the same results, for checks and measurements: --n-prefill each).
  bool share_prompt = true;
  // A prompt whose first tokens some slot already holds (or an admitted prompt will compute) gets those
  // KV rows copied into its slot and computes only the rest (--prefix-sharing; the same results). A prompt
  // that asks for prompt log-probs computes every position itself (a copied row has no logits), though
  // others may take its rows.
  bool prefix_sharing = false;
  // Speculative decoding (--speculate): an unpenalized sequence's decode step (greedy or sampled) carries
  // up to draft_max drafted tokens, verified in one chunk; a draft is kept when the row's draw
  // (compute::Sampler::verify) accepts it, which gives the same tokens and log-probs as without. 0 = off.
  int32_t draft_max = 0;
  // With draft_max > 0, where the drafts come from (--speculate draft:PATH, a model the caller owns and
  // keeps alive); nullptr: prompt lookup.
  DraftSource* drafts = nullptr;
};

// Speculative decoding's counts over a run.
struct SpeculationCounts {
  int64_t verifications = 0;  // decode steps that carried drafted tokens
  int64_t drafted = 0;        // tokens drafted in them
  int64_t accepted = 0;       // drafted tokens the verify rows accepted (emitted without a step of their own)
  int64_t emitted = 0;        // tokens those steps emitted (accepted plus the model's own next tokens)
  int64_t rejected = 0;       // of those steps, the ones that ended at a draft their row did not accept
  int64_t plain_sequences = 0;  // sequences that could not speculate (penalized): decoded one token a step
  // Decode steps of sequences that could speculate which carried no drafts by the policy's decision
  // (speculation_policy.h): the decode groups were already full, or the sequence's acceptance too low.
  int64_t skipped_ring_full = 0;
  int64_t skipped_low_acceptance = 0;
};

class Scheduler {
 public:
  // should_stop(outcome): after a sampled token, whether generation ends there (EOS, stop string).
  // on_finished(outcome): called once per sequence as it finishes, in finishing order.
  Scheduler(SchedulerOptions opts, Ring& ring, std::function<bool(const SequenceOutcome&)> should_stop,
            std::function<void(SequenceOutcome&&)> on_finished);

  // Queues a sequence; a request that cannot fit the context (or whose samples outnumber the slots)
  // finishes at once with an error, once per sample.
  void add(SequenceRequest req);
  // Runs until every queued sequence has finished (or, after request_drain(), the admitted ones).
  void run();
  // Stops admitting queued sequences; those already admitted run to the end.
  void request_drain() { draining_ = true; }
  // Polled once per scheduling round: when it returns true, the scheduler drains (SIGTERM handling).
  void set_drain_check(std::function<bool()> check) { drain_check_ = std::move(check); }
  // What the decode-groups policy is told before each micro-batch is built.
  struct DecodeGroupsQuery {
    int32_t live = 0;  // admitted generate sequences, prefilling ones too (a wave's start is not few decoding)
    int64_t decode_steps_sent = 0;   // decode steps in the micro-batches sent so far
    int64_t prompt_tokens_sent = 0;  // prompt tokens in them (prompt_tokens_computed)
  };
  // Asked before each micro-batch is built: the decode groups for it (--decode-groups auto re-tuning
  // between waves and its measured trials). A micro-batch's grouping is fixed when it is built.
  void set_decode_groups_policy(std::function<int32_t(const DecodeGroupsQuery&)> policy) { decode_groups_policy_ = std::move(policy); }
  bool drained_early() const { return draining_ && !waiting_.empty(); }
  // Sequences queued and not yet admitted (a driver that feeds the scheduler as it goes tops this up).
  size_t queued() const { return waiting_.size(); }
  int64_t micro_batches_sent() const { return next_mb_id_; }
  // Prompt tokens sent into the ring (prefill and score chunks, not decode steps): a prompt with n
  // samples counts once.
  int64_t prompt_tokens_computed() const { return prompt_tokens_computed_; }
  // Prompt tokens whose KV rows came from the prefix cache instead (prefix_sharing).
  int64_t prompt_tokens_reused() const { return prompt_tokens_reused_; }
  const SpeculationCounts& speculation() const { return speculation_; }

 private:
  struct Active {
    SequenceRequest req;
    SequenceOutcome out;
    int32_t slot = -1;
    int32_t n_fed = 0;          // tokens already sent into the ring
    int32_t chunks_in_flight = 0;
    bool awaiting_sample = false;
    bool finished = false;
    double t_start = 0.0;
    // Samples 1..n-1 of a prompt: held until their first token is drawn and their copy of the
    // prompt's KV is in a micro-batch. Sample 0 keeps its slot until every copy from it is sent.
    bool held = false;
    int32_t leader_slot = -1;
    int32_t copies_pending = 0;
    // A sequence's first chunk carries its settings (the samples sharing a prefill get theirs by copy).
    bool started = false;
    // Shared prefix: the first prefix_len rows come from prefix_src's slot, by a copy queued once that
    // slot holds them (prefix_copy_queued); the sequence is fed only after the copy is sent. The source
    // keeps its slot while prefix_copies_pending copies from it are unsent (its own feeding goes on:
    // it writes only later positions).
    bool awaiting_prefix = false;
    bool prefix_copy_queued = false;
    int32_t prefix_src = -1;
    int32_t prefix_len = 0;
    int32_t prefix_copies_pending = 0;
    // Speculation: the tokens drafted into the decode step in flight, which starts at verify_start.
    std::vector<int32_t> draft;
    int32_t verify_start = -1;
    DraftAcceptance acceptance;  // its drafts' acceptance so far, which sets their length
  };
  // Whether a sequence's decode steps may carry drafts: unpenalized ones, greedy or sampled (a draft the
  // model rejects would have entered the penalties' token counts).
  bool may_speculate(const SequenceRequest& r) const;
  // Takes the rows of a verify chunk's result, in order, while they accepted the drafts.
  void apply_verify(Active& a, const compute::ChunkResult& cr, const compute::MicroBatchResult& r);
  void admit();
  // A free slot for a new sequence (prefix_sharing: the one whose rows are least worth keeping).
  int32_t take_free_slot();
  // Places a new sequence: its slot, and the prefix of its prompt it takes from another slot.
  void place(Active& a);
  // The queued prompt to admit next: the head, or (prefix_sharing) one whose prefix a free slot holds.
  size_t next_to_admit();
  // Queues the copies of deferred prefixes whose source slot now holds them.
  void resolve_prefixes();
  bool build(compute::MicroBatch& mb);
  // Whether to hold the decode steps that are ready until a full group of decode_cap has come back:
  // nothing else is ready to send, and decode_groups micro-batches with decode steps are already in the
  // ring (so it stays busy meanwhile).
  bool waits_to_fill_group(int32_t decode_cap) const;
  // Whether a sequence has tokens to send and nothing holding it back (a sample, a copy, a prefix).
  static bool ready_to_feed(const Active& a);
  // Whether its next chunk is one decode step (its prompt sent, one token to feed back).
  static bool next_is_decode_step(const Active& a);
  void apply(const compute::MicroBatchResult& r);
  // The first tokens of sample 0's siblings, drawn with its prompt's last row.
  void start_siblings(Active& leader, const compute::ChunkResult& cr, const compute::MicroBatchResult& r);
  // first_top, n_top: the token's alternatives in r.top_ids / r.top_logprobs.
  bool take_token(Active& a, int32_t token, float logprob, int32_t first_top, int32_t n_top,
                  const compute::MicroBatchResult& r);
  Active* by_slot(int32_t slot);
  void finish(Active& a, FinishReason why, std::string error = {});
  void retire_finished();

  SchedulerOptions opts_;
  LookupDrafts lookup_drafts_;
  DraftSource* drafts_;  // opts_.drafts, or lookup_drafts_
  Ring& ring_;
  std::function<bool(const SequenceOutcome&)> should_stop_;
  std::function<void(SequenceOutcome&&)> on_finished_;
  std::deque<SequenceRequest> waiting_;
  std::vector<Active> active_;     // admitted sequences, in admission order
  std::vector<int32_t> free_slots_;
  std::deque<compute::SlotCopy> pending_copies_;  // sent first in the next micro-batches, in order
  int64_t prompt_tokens_computed_ = 0;
  int64_t prompt_tokens_reused_ = 0;
  SpeculationCounts speculation_;
  int32_t head_overtaken_ = 0;  // admissions that passed the queue's head over since it became the head
  PrefixIndex prefix_;
  int32_t in_flight_ = 0;
  // The ids of the micro-batches in the ring that carry decode steps.
  std::vector<int64_t> decode_in_flight_;
  int64_t next_mb_id_ = 0;
  bool draining_ = false;
  std::function<bool()> drain_check_;
  std::function<int32_t(const DecodeGroupsQuery&)> decode_groups_policy_;
  int64_t decode_steps_sent_ = 0;
};

}  // namespace glacier::pipeline
