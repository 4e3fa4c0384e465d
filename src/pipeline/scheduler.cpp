// Scheduler: the single source of truth for slots and positions. A sequence may have several prefill
// chunks in the ring at once (stages keep micro-batch order, so its KV is written in order), but at
// most one chunk that needs a sampled token, since the next step needs that token.
#include "pipeline/scheduler.h"

#include <algorithm>

#include "compute/sampler.h"
#include "pipeline/prompt_lookup.h"
#include "pipeline/trace.h"
#include "util/clock.h"
#include "util/error.h"

namespace glacier::pipeline {

Scheduler::Scheduler(SchedulerOptions opts, Ring& ring, std::function<bool(const SequenceOutcome&)> should_stop,
                     std::function<void(SequenceOutcome&&)> on_finished)
    : opts_(opts),
      ring_(ring),
      should_stop_(std::move(should_stop)),
      on_finished_(std::move(on_finished)),
      prefix_(opts.n_slots) {
  drafts_ = opts_.drafts ? opts_.drafts : &lookup_drafts_;
  GLACIER_ASSERT(opts_.n_slots > 0 && opts_.ubatch > 0 && opts_.max_in_flight > 0, "scheduler options positive");
  for (int32_t s = opts_.n_slots - 1; s >= 0; --s) free_slots_.push_back(s);
  active_.reserve(static_cast<size_t>(opts_.n_slots));
}

void Scheduler::add(SequenceRequest req) {
  const int64_t positions = static_cast<int64_t>(req.tokens.size()) +
                            (req.mode == SeqMode::Generate ? req.max_new_tokens : 0);
  // Every sample of a request that cannot run gets the same ending.
  const int32_t samples = std::clamp(req.n_samples, 1, compute::kMaxSamplesPerPrompt);
  auto report = [&](SequenceOutcome&& o) {
    for (int32_t j = 0; j < samples; ++j) {
      SequenceOutcome copy = o;
      copy.sample = req.row + j;
      on_finished_(std::move(copy));
    }
  };
  SequenceOutcome out;
  out.seq = req.seq;
  if (req.n_samples < 1 || req.n_samples > std::min(compute::kMaxSamplesPerPrompt, opts_.n_slots) ||
      (req.n_samples > 1 && req.mode != SeqMode::Generate)) {
    out.finish = FinishReason::Error;
    std::string msg = "n of ";
    msg += std::to_string(req.n_samples);
    if (req.mode != SeqMode::Generate) {
      msg += " samples: expected 1 when scoring (a score has one answer)";
    } else {
      msg += " samples: expected 1..";
      msg += std::to_string(std::min(compute::kMaxSamplesPerPrompt, opts_.n_slots));
      msg += " (each sample holds one of the job's ";
      msg += std::to_string(opts_.n_slots);
      msg += " KV slots, --slots)";
    }
    out.error = std::move(msg);
    report(std::move(out));
  } else if (req.tokens.empty()) {
    out.finish = FinishReason::Error;
    out.error = "the prompt has no tokens";
    report(std::move(out));
  } else if (positions > opts_.n_ctx) {
    out.finish = FinishReason::Error;
    // Built with += (GCC 12 warns falsely on long operator+ chains of std::string).
    std::string msg = "prompt of ";
    msg += std::to_string(req.tokens.size());
    msg += " tokens";
    if (req.mode == SeqMode::Generate) {
      msg += " plus max_tokens ";
      msg += std::to_string(req.max_new_tokens);
    }
    msg += " needs ";
    msg += std::to_string(positions);
    msg += " positions, more than the context of ";
    msg += std::to_string(opts_.n_ctx);
    msg += " (--ctx)";
    out.error = std::move(msg);
    report(std::move(out));
  } else if (req.logit_bias.size() > static_cast<size_t>(compute::kMaxLogitBiasEntries) ||
             req.min_tokens_mask.size() > static_cast<size_t>(compute::kMaxMinTokensMask)) {
    out.finish = FinishReason::Error;
    std::string msg = "logit_bias of ";
    msg += std::to_string(req.logit_bias.size());
    msg += " entries and min_tokens ids of ";
    msg += std::to_string(req.min_tokens_mask.size());
    msg += ": expected at most ";
    msg += std::to_string(compute::kMaxLogitBiasEntries);
    msg += " and ";
    msg += std::to_string(compute::kMaxMinTokensMask);
    out.error = std::move(msg);
    report(std::move(out));
  } else if (req.mode == SeqMode::Generate && req.max_new_tokens == 0) {
    out.finish = FinishReason::Length;
    report(std::move(out));
  } else {
    waiting_.push_back(std::move(req));
  }
}

namespace {

// Shorter common prefixes (a BOS, a chat template's first tokens) are not shared: computing them costs
// less than waiting a micro-batch for their source's rows.
constexpr int32_t kMinSharedPrefix = 8;

// The prompt positions a sequence may take from another slot: never its last token (its row gives the
// first output, or its score), never a scored position (prompt log-probs score them all), and none for
// penalized sampling (the last stage counts the prompt's tokens as its chunks feed them, and copied rows
// feed nothing).
int32_t reusable_prefix(const SequenceRequest& r) {
  const auto n = static_cast<int32_t>(r.tokens.size());
  // Prompt log-probs score every prompt position: none may come without its logits.
  if (r.mode == SeqMode::Generate) return r.sampling.penalized() || !r.targets.empty() ? 0 : n - 1;
  int32_t first_scored = n - 1;
  for (int32_t i = 0; i < static_cast<int32_t>(r.targets.size()); ++i)
    if (r.targets[static_cast<size_t>(i)] >= 0) {
      first_scored = i;
      break;
    }
  return std::min(first_scored, n - 1);
}

}  // namespace

int32_t Scheduler::take_free_slot() {
  GLACIER_ASSERT(!free_slots_.empty(), "a free slot to take");
  auto it = std::prev(free_slots_.end());
  if (opts_.prefix_sharing) it = std::find(free_slots_.begin(), free_slots_.end(), prefix_.victim(free_slots_));
  const int32_t slot = *it;
  free_slots_.erase(it);
  prefix_.truncate(slot, 0);
  prefix_.touch(slot);
  return slot;
}

void Scheduler::place(Active& a) {
  if (!opts_.prefix_sharing) {
    a.slot = take_free_slot();
    return;
  }
  const int32_t limit = reusable_prefix(a.req);
  const std::span<const int32_t> prompt(a.req.tokens);
  // Rows already sent, in a free slot or an admitted sequence's, against rows an admitted sequence
  // will compute (its prompt: a generated token's row is never shared).
  std::vector<int32_t> holders = free_slots_;
  for (const Active& s : active_) holders.push_back(s.slot);
  const PrefixIndex::Match sent = prefix_.longest(prompt, limit, holders);
  PrefixIndex::Match planned;
  for (const Active& s : active_) {
    if (s.finished) continue;
    const size_t prompt_end = s.req.tokens.size() - s.out.generated.size();
    const int32_t n = common_prefix(prompt, std::span<const int32_t>(s.req.tokens.data(), prompt_end), limit);
    if (n > planned.length) planned = {s.slot, n};
  }
  if (sent.length >= kMinSharedPrefix && sent.length >= planned.length &&
      std::find(free_slots_.begin(), free_slots_.end(), sent.slot) != free_slots_.end()) {
    // A free slot holds the prefix: the sequence takes it as it is and writes from there on.
    free_slots_.erase(std::find(free_slots_.begin(), free_slots_.end(), sent.slot));
    a.slot = sent.slot;
    prefix_.truncate(a.slot, sent.length);
    prefix_.touch(a.slot);
    a.n_fed = sent.length;
    a.prefix_len = sent.length;
    prompt_tokens_reused_ += sent.length;
    return;
  }
  a.slot = take_free_slot();
  const PrefixIndex::Match& from = sent.length > 0 && sent.length >= planned.length ? sent : planned;
  if (from.length < kMinSharedPrefix) return;
  Active* src = by_slot(from.slot);
  GLACIER_ASSERT(src, "a prefix source among the admitted sequences");
  src->prefix_copies_pending++;
  a.awaiting_prefix = true;
  a.prefix_src = from.slot;
  a.prefix_len = from.length;
  a.n_fed = from.length;
}

void Scheduler::resolve_prefixes() {
  for (Active& a : active_) {
    if (!a.awaiting_prefix || a.prefix_copy_queued) continue;
    const Active* src = by_slot(a.prefix_src);
    GLACIER_ASSERT(src && src->prefix_copies_pending > 0, "an admitted prefix source");
    const int32_t held = prefix_.length(a.prefix_src);
    if (held < a.prefix_len && !src->finished) continue;  // its chunks up to there are not all sent yet
    // A source that failed before computing the whole prefix gives what it holds.
    a.prefix_len = std::min(held, a.prefix_len);
    a.n_fed = a.prefix_len;
    if (a.prefix_len == 0) {
      by_slot(a.prefix_src)->prefix_copies_pending--;
      a.awaiting_prefix = false;
      continue;
    }
    pending_copies_.push_back({a.prefix_src, a.slot, a.prefix_len});
    a.prefix_copy_queued = true;
  }
}

size_t Scheduler::next_to_admit() {
  if (!opts_.prefix_sharing || head_overtaken_ >= opts_.n_slots) return 0;
  // A queued prompt whose prefix a free slot holds goes first: taking that slot as it is keeps the rows
  // (the head would evict them if its own prefix is elsewhere). The head is passed over at most n_slots
  // times, so no prompt waits for ever.
  size_t best = 0;
  int32_t best_length = 0;
  for (size_t i = 0; i < waiting_.size(); ++i) {
    const SequenceRequest& r = waiting_[i];
    if (free_slots_.size() < static_cast<size_t>(r.n_samples)) continue;
    const int32_t n = prefix_.longest(r.tokens, reusable_prefix(r), free_slots_).length;
    if (n >= kMinSharedPrefix && n > best_length) {
      best = i;
      best_length = n;
    }
  }
  return best;
}

void Scheduler::admit() {
  // A prompt of n samples waits for n free slots (in queue order, but for next_to_admit's choice).
  for (size_t next; !draining_ && !waiting_.empty() &&
                    free_slots_.size() >= static_cast<size_t>(waiting_[next = next_to_admit()].n_samples);) {
    head_overtaken_ = next == 0 ? 0 : head_overtaken_ + 1;
    Active a;
    a.req = std::move(waiting_[next]);
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(next));
    place(a);
    a.out.seq = a.req.seq;
    a.out.sample = a.req.row;
    a.t_start = now_seconds();
    if (a.req.mode == SeqMode::Generate) {
      a.req.tokens.reserve(a.req.tokens.size() + static_cast<size_t>(a.req.max_new_tokens));
      a.out.generated.reserve(static_cast<size_t>(a.req.max_new_tokens));
      a.out.logprobs.reserve(static_cast<size_t>(a.req.max_new_tokens));
    }
    // The other samples: the prompt's tokens count as fed (sample 0's prefill computes them for all).
    for (int32_t j = 1; j < a.req.n_samples; ++j) {
      Active s;
      if (!opts_.share_prompt) {  // a sequence of its own, prompt and settings included
        s.req = a.req;
        s.req.n_samples = 1;
        s.req.prompt_key = compute::sample_stream_key(a.req.prompt_key, j);
        s.slot = take_free_slot();
        s.out.seq = a.req.seq;
        s.out.sample = a.req.row + j;
        s.t_start = a.t_start;
        active_.push_back(std::move(s));
        continue;
      }
      s.req.seq = a.req.seq;
      s.req.row = a.req.row;
      s.req.tokens = a.req.tokens;
      s.req.mode = a.req.mode;
      s.req.max_new_tokens = a.req.max_new_tokens;
      s.req.sampling = a.req.sampling;
      s.req.prompt_key = compute::sample_stream_key(a.req.prompt_key, j);
      s.slot = take_free_slot();
      s.n_fed = static_cast<int32_t>(s.req.tokens.size());
      s.started = true;
      s.out.seq = a.req.seq;
      s.out.sample = a.req.row + j;
      s.out.generated.reserve(static_cast<size_t>(a.req.max_new_tokens));
      s.out.logprobs.reserve(static_cast<size_t>(a.req.max_new_tokens));
      s.t_start = a.t_start;
      s.held = true;
      s.leader_slot = a.slot;
      s.awaiting_sample = true;
      active_.push_back(std::move(s));
    }
    if (opts_.draft_max > 0 && a.req.mode == SeqMode::Generate && !may_speculate(a.req))
      speculation_.plain_sequences += a.req.n_samples;
    if (!opts_.share_prompt) a.req.n_samples = 1;
    active_.push_back(std::move(a));
  }
}

Scheduler::Active* Scheduler::by_slot(int32_t slot) {
  auto it = std::find_if(active_.begin(), active_.end(), [&](const Active& a) { return a.slot == slot; });
  return it == active_.end() ? nullptr : &*it;
}

bool Scheduler::build(compute::MicroBatch& mb) {
  mb.clear();
  resolve_prefixes();
  // Copies first: their micro-batch runs them before its chunks on every stage, so a sample's first
  // decode step (in this micro-batch or a later one) finds the prompt's KV in its slot, and sample 0's
  // slot still holds the prompt (it is neither freed nor fed before its copies are sent).
  while (!pending_copies_.empty() && mb.copies.size() < static_cast<size_t>(compute::kMaxCopiesPerMicroBatch)) {
    const compute::SlotCopy c = pending_copies_.front();
    pending_copies_.pop_front();
    mb.copies.push_back(c);
    Active* src = by_slot(c.src_slot);
    Active* dst = by_slot(c.dst_slot);
    GLACIER_ASSERT(src && dst, "a slot copy between two admitted sequences");
    if (dst->awaiting_prefix) {  // a shared prefix
      GLACIER_ASSERT(src->prefix_copies_pending > 0, "a prefix copy its source counts");
      src->prefix_copies_pending--;
      dst->awaiting_prefix = false;
      prompt_tokens_reused_ += c.n_pos;
    } else {  // a prompt's prefill, to a further sample
      GLACIER_ASSERT(src->copies_pending > 0, "a sample's copy its leader counts");
      src->copies_pending--;
      dst->held = false;
    }
    prefix_.copy_prefix(c.src_slot, c.dst_slot, c.n_pos);
  }
  int32_t budget = opts_.ubatch;
  int32_t extra_samples = 0;  // draws beyond each chunk's first, within kMaxExtraSamplesPerMicroBatch
  // Decode steps are spread over decode_groups micro-batches so that several are in the ring at once.
  int32_t decoding = 0;
  int32_t generating = 0;  // admitted generate sequences, prefilling or decoding: the groups policy's count
  for (const Active& a : active_) {
    if (!a.finished && a.req.mode == SeqMode::Generate) ++generating;
    if (!a.finished && !a.held && !a.awaiting_prefix && a.started &&
        a.n_fed >= static_cast<int32_t>(a.req.tokens.size()) - 1)
      ++decoding;
  }
  if (decode_groups_policy_)
    opts_.decode_groups = std::max(1, decode_groups_policy_({generating, decode_steps_sent_, prompt_tokens_computed_}));
  const int32_t decode_cap = std::max(1, (decoding + opts_.decode_groups - 1) / opts_.decode_groups);
  if (mb.copies.empty() && waits_to_fill_group(decode_cap)) return false;
  int32_t decode_taken = 0;
  // The drafting row of this micro-batch: its lookups' summed time, drawn from the first one's start,
  // and the tokens they drafted.
  TraceLog* const trace = opts_.draft_max > 0 ? ring_.trace() : nullptr;
  double draft_start = 0.0, draft_seconds = 0.0;
  int32_t draft_lookups = 0, draft_tokens = 0;
  for (Active& a : active_) {
    if (budget == 0) break;
    if (!ready_to_feed(a)) continue;
    const int32_t remaining = static_cast<int32_t>(a.req.tokens.size()) - a.n_fed;
    const bool is_decode_step = next_is_decode_step(a);
    if (is_decode_step && decode_taken >= decode_cap) continue;
    // A first chunk carries its sequence's settings; one that would overflow this micro-batch's share
    // waits for the next (a micro-batch always has room for one sequence's).
    const bool first_generate_chunk = a.req.mode == SeqMode::Generate && !a.started;
    if (first_generate_chunk &&
        (mb.biases.size() + a.req.logit_bias.size() > static_cast<size_t>(compute::kMaxBiasesPerMicroBatch) ||
         mb.min_mask.size() + a.req.min_tokens_mask.size() > static_cast<size_t>(compute::kMaxMaskPerMicroBatch)))
      continue;
    compute::Chunk c;
    c.seq = a.slot;  // unique among admitted sequences (the samples of one prompt share req.seq)
    c.slot = a.slot;
    c.start_pos = a.n_fed;
    c.n_tokens = std::min(remaining, budget);
    c.token_offset = mb.n_tokens();
    c.starts_sequence = !a.started;
    bool last_chunk = c.n_tokens == remaining;
    // The chunk that draws a prompt's n first tokens: its extra draws must fit this micro-batch's result,
    // or it ends one token short (that token comes in the next micro-batch).
    const bool draws_samples = a.req.mode == SeqMode::Generate && last_chunk && a.out.generated.empty() &&
                               a.req.n_samples > 1;
    if (draws_samples && extra_samples + a.req.n_samples - 1 > compute::kMaxExtraSamplesPerMicroBatch) {
      if (remaining == 1) continue;
      c.n_tokens = remaining - 1;
      last_chunk = false;
    }
    // An unpenalized decode step, greedy or sampled, carries drafted tokens when the policy says they pay
    // (decode groups not yet full, acceptance high enough: at most the length it allows) and it has room
    // for them: within the tokens the sequence may still emit (it emits one more than it keeps drafts),
    // the budget and the draws bound.
    int32_t n_draft = 0;
    if (is_decode_step && !a.out.generated.empty() && may_speculate(a.req)) {
      const DraftDecision decision = decide_draft(decode_cap, opts_.draft_max, a.acceptance);
      if (decision.verdict == DraftVerdict::RingFull) {
        ++speculation_.skipped_ring_full;
      } else if (decision.verdict == DraftVerdict::LowAcceptance) {
        ++speculation_.skipped_low_acceptance;
      } else {
        const int32_t room = std::min({decision.max_tokens, a.req.max_new_tokens - static_cast<int32_t>(a.out.generated.size()) - 1,
                                       budget - 1, compute::kMaxExtraSamplesPerMicroBatch - extra_samples});
        const double t0 = trace ? trace->now() : 0.0;
        n_draft = drafts_->propose(a.slot, a.req.tokens, room, a.draft);
        if (trace) {
          if (draft_lookups == 0) draft_start = t0;
          draft_seconds += trace->now() - t0;
          draft_lookups++;
          draft_tokens += n_draft;
        }
      }
    }
    if (a.req.mode == SeqMode::Generate) {
      c.output = last_chunk ? compute::OutputKind::Sample : compute::OutputKind::None;
      c.step = static_cast<int32_t>(a.out.generated.size());
      c.prompt_key = a.req.prompt_key;
      c.sampling = a.req.sampling;
      c.target_top = a.req.prompt_top;
      if (last_chunk && a.out.generated.empty()) {
        c.n_samples = a.req.n_samples;
        extra_samples += a.req.n_samples - 1;
      }
      if (first_generate_chunk) {
        c.first_bias = static_cast<int32_t>(mb.biases.size());
        c.n_biases = static_cast<int32_t>(a.req.logit_bias.size());
        mb.biases.insert(mb.biases.end(), a.req.logit_bias.begin(), a.req.logit_bias.end());
        c.first_mask = static_cast<int32_t>(mb.min_mask.size());
        c.n_mask = static_cast<int32_t>(a.req.min_tokens_mask.size());
        mb.min_mask.insert(mb.min_mask.end(), a.req.min_tokens_mask.begin(), a.req.min_tokens_mask.end());
      }
      a.awaiting_sample = last_chunk;
    } else {
      c.output = compute::OutputKind::Score;
    }
    for (int32_t j = 0; j < c.n_tokens; ++j) {
      mb.tokens.push_back(a.req.tokens[a.n_fed + j]);
      // Generate's targets cover the prompt only; the output tokens fed back have none.
      const auto at = static_cast<size_t>(a.n_fed + j);
      mb.targets.push_back(at < a.req.targets.size() ? a.req.targets[at] : -1);
    }
    if (n_draft > 0) {
      c.output = compute::OutputKind::Verify;
      c.n_tokens += n_draft;
      mb.tokens.insert(mb.tokens.end(), a.draft.begin(), a.draft.end());
      mb.targets.insert(mb.targets.end(), static_cast<size_t>(n_draft), -1);
      extra_samples += n_draft;
      a.verify_start = c.start_pos;
      speculation_.verifications++;
      speculation_.drafted += n_draft;
    }
    mb.chunks.push_back(c);
    // The prompt's positions (the output tokens fed back are the rest).
    const int32_t prompt_end = static_cast<int32_t>(a.req.tokens.size() - a.out.generated.size());
    const int32_t prompt_fed = std::max(0, std::min(a.n_fed + c.n_tokens, prompt_end) - a.n_fed);
    prompt_tokens_computed_ += prompt_fed;
    // The prefix index holds a prompt's rows (never a generated token's) as their chunks are sent.
    GLACIER_ASSERT(prompt_fed == 0 || prefix_.length(a.slot) == a.n_fed, "the prefix index in step with the slot");
    prefix_.append(a.slot, std::span<const int32_t>(a.req.tokens.data() + a.n_fed, static_cast<size_t>(prompt_fed)));
    a.started = true;
    a.n_fed += c.n_tokens;
    a.chunks_in_flight++;
    budget -= c.n_tokens;
    if (is_decode_step) {
      ++decode_taken;
      ++decode_steps_sent_;
    }
  }
  if (mb.chunks.empty() && mb.copies.empty()) return false;
  mb.id = next_mb_id_++;
  if (decode_taken > 0) decode_in_flight_.push_back(mb.id);
  if (draft_lookups > 0) trace->add(mb.id, Phase::Draft, draft_start, draft_start + draft_seconds, draft_tokens);
  return true;
}

bool Scheduler::waits_to_fill_group(int32_t decode_cap) const {
  // Without this, a group keeps the size it came back with: the prefill's cohorts, a trial's other count
  // or a re-tune leave fragments that go round as micro-batches of their own (a 4-stage ring re-tuned from
  // 6 groups back to 4 sent 8 micro-batches a round, of 1 to 11 rows, for the rest of the run).
  if (decode_in_flight_.size() < static_cast<size_t>(opts_.decode_groups)) return false;
  int32_t ready = 0;
  for (const Active& a : active_) {
    if (!ready_to_feed(a)) continue;
    if (!next_is_decode_step(a)) return false;  // a prompt chunk to send
    ++ready;
  }
  return ready < decode_cap;
}

bool Scheduler::ready_to_feed(const Active& a) {
  return !a.finished && !a.held && !a.awaiting_prefix && a.copies_pending == 0 && !a.awaiting_sample &&
         a.n_fed < static_cast<int32_t>(a.req.tokens.size());
}

bool Scheduler::next_is_decode_step(const Active& a) {
  return a.req.mode == SeqMode::Generate && a.started && a.n_fed + 1 == static_cast<int32_t>(a.req.tokens.size());
}

void Scheduler::finish(Active& a, FinishReason why, std::string error) {
  a.finished = true;
  a.held = false;
  a.out.finish = why;
  a.out.error = std::move(error);
  a.out.total_time = now_seconds() - a.t_start;
}

bool Scheduler::take_token(Active& a, int32_t token, float logprob, int32_t first_top, int32_t n_top,
                           const compute::MicroBatchResult& r) {
  a.awaiting_sample = false;
  if (a.out.generated.empty()) a.out.time_to_first_token = now_seconds() - a.t_start;
  a.out.generated.push_back(token);
  a.out.logprobs.push_back(logprob);
  // The alternatives of the row the token was drawn from (a prompt's samples share their first row's).
  a.out.top_ids.insert(a.out.top_ids.end(), r.top_ids.begin() + first_top, r.top_ids.begin() + first_top + n_top);
  a.out.top_logprobs.insert(a.out.top_logprobs.end(), r.top_logprobs.begin() + first_top,
                            r.top_logprobs.begin() + first_top + n_top);
  if (should_stop_ && should_stop_(a.out)) {
    finish(a, FinishReason::Stop);
  } else if (static_cast<int32_t>(a.out.generated.size()) >= a.req.max_new_tokens) {
    finish(a, FinishReason::Length);
  } else {
    a.req.tokens.push_back(token);  // fed in the next decode step
    return true;
  }
  return false;
}

void Scheduler::start_siblings(Active& leader, const compute::ChunkResult& cr, const compute::MicroBatchResult& r) {
  GLACIER_ASSERT(cr.n_extra == leader.req.n_samples - 1 &&
                     static_cast<size_t>(cr.first_sample + cr.n_extra) <= r.sample_tokens.size(),
                 "a draw for each further sample of the prompt");
  const auto n_prompt = static_cast<int32_t>(leader.req.tokens.size());
  for (Active& s : active_) {
    if (!s.held || s.leader_slot != leader.slot || !s.out.generated.empty()) continue;
    const size_t k = static_cast<size_t>(cr.first_sample + (s.out.sample - leader.req.row) - 1);
    if (take_token(s, r.sample_tokens[k], r.sample_logprobs[k], cr.first_top, cr.n_top, r)) {
      pending_copies_.push_back({leader.slot, s.slot, n_prompt});
      leader.copies_pending++;
    }
  }
}

void Scheduler::apply(const compute::MicroBatchResult& r) {
  std::erase(decode_in_flight_, r.id);
  for (const compute::ChunkResult& cr : r.chunks) {
    Active* found = by_slot(cr.seq);
    GLACIER_ASSERT(found, "result for an admitted sequence");
    Active& a = *found;
    a.chunks_in_flight--;
    if (a.finished) continue;
    if (!a.draft.empty()) {
      apply_verify(a, cr, r);
      continue;
    }
    if (cr.non_finite) {
      const std::string why = "the model produced non-finite logits (NaN or Inf) for this prompt";
      if (a.out.generated.empty() && a.req.n_samples > 1)  // the shared prefill: every sample fails
        for (Active& s : active_)
          if (s.held && s.leader_slot == a.slot && !s.finished) finish(s, FinishReason::Error, why);
      finish(a, FinishReason::Error, why);
      continue;
    }
    if (a.req.mode == SeqMode::Score) {
      for (int32_t i = 0; i < cr.n_targets; ++i) {
        a.out.target_logprobs.push_back(r.target_logprobs[cr.first_target + i]);
        a.out.target_greedy.push_back(r.target_greedy[cr.first_target + i]);
      }
      if (a.n_fed == static_cast<int32_t>(a.req.tokens.size()) && a.chunks_in_flight == 0)
        finish(a, FinishReason::Length);
      continue;
    }
    for (int32_t i = 0; i < cr.n_targets; ++i) {  // prompt log-probs
      a.out.target_logprobs.push_back(r.target_logprobs[cr.first_target + i]);
      const auto top = r.top_ids.begin() + cr.first_target_top + i * cr.n_target_top;
      a.out.target_top_ids.insert(a.out.target_top_ids.end(), top, top + cr.n_target_top);
      const auto values = r.top_logprobs.begin() + cr.first_target_top + i * cr.n_target_top;
      a.out.target_top_logprobs.insert(a.out.target_top_logprobs.end(), values, values + cr.n_target_top);
    }
    if (cr.token < 0) continue;  // a prefill chunk that needed no output
    if (a.out.generated.empty() && a.req.n_samples > 1) start_siblings(a, cr, r);
    take_token(a, cr.token, cr.logprob, cr.first_top, cr.n_top, r);
  }
}

// Greedy and sampled rows speculate (the last stage's verify rows apply the rejection rule of
// compute::Sampler::verify, exact for both). Penalized rows do not: the last stage counts a slot's tokens
// as its chunks feed them (SlotLogitStates), so a verify chunk would count drafts that are then rejected,
// and the rows after a draft would see it counted before it is accepted; their penalties would differ
// from plain decoding's.
bool Scheduler::may_speculate(const SequenceRequest& r) const {
  return opts_.draft_max > 0 && r.mode == SeqMode::Generate && !r.sampling.penalized();
}

void Scheduler::apply_verify(Active& a, const compute::ChunkResult& cr, const compute::MicroBatchResult& r) {
  const auto n_draft = static_cast<int32_t>(a.draft.size());
  GLACIER_ASSERT(cr.n_extra == n_draft && static_cast<size_t>(cr.first_sample + cr.n_extra) <= r.sample_tokens.size(),
                 "a verify result with a row for each drafted token");
  // Row j is what plain decoding would draw after the drafts before it; a non-finite row fails the
  // sequence only if plain decoding would have reached it.
  const int32_t bad_row = cr.non_finite > 0 ? cr.non_finite - 1 : n_draft + 1;
  int32_t row = 0;
  int32_t accepted_now = 0;
  bool rejected = false;
  for (;; ++row) {
    if (row == bad_row) {
      finish(a, FinishReason::Error, "the model produced non-finite logits (NaN or Inf) for this prompt");
      break;
    }
    const int32_t token = row == 0 ? cr.token : r.sample_tokens[static_cast<size_t>(cr.first_sample + row - 1)];
    const float logprob = row == 0 ? cr.logprob : r.sample_logprobs[static_cast<size_t>(cr.first_sample + row - 1)];
    const bool goes_on = take_token(a, token, logprob, cr.first_top + row * cr.n_top, cr.n_top, r);
    ++speculation_.emitted;
    if (!goes_on) break;  // a stop, or max_tokens
    if (row == n_draft) break;  // the model's own next token after every draft
    // A row whose draft was not accepted drew another token (Sampler::verify): the model's own in its place.
    if (token != a.draft[static_cast<size_t>(row)]) {
      rejected = true;
      break;
    }
    ++speculation_.accepted;
    ++accepted_now;
  }
  a.acceptance.record(accepted_now, rejected);
  if (rejected) ++speculation_.rejected;
  if (!a.finished) {
    // The rows after the last kept one hold rejected drafts: the next step writes over them (attention
    // at a position reads only the positions before it, so they are never read).
    a.n_fed = a.verify_start + 1 + row;
    GLACIER_ASSERT(a.n_fed + 1 == static_cast<int32_t>(a.req.tokens.size()), "the verified tokens fed but the last");
  }
  a.draft.clear();
  a.verify_start = -1;
}

void Scheduler::retire_finished() {
  for (size_t i = 0; i < active_.size();) {
    Active& a = active_[i];
    if (a.finished && a.chunks_in_flight == 0 && a.copies_pending == 0 && a.prefix_copies_pending == 0) {
      free_slots_.push_back(a.slot);
      prefix_.touch(a.slot);
      on_finished_(std::move(a.out));
      active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

void Scheduler::run() {
  compute::MicroBatch mb;
  compute::MicroBatchResult result;
  for (;;) {
    if (drain_check_ && !draining_ && drain_check_()) draining_ = true;
    admit();
    while (in_flight_ < opts_.max_in_flight && build(mb)) {
      ring_.submit(mb);
      ++in_flight_;
    }
    if (in_flight_ == 0) {
      GLACIER_ASSERT(active_.empty(), "active sequences but nothing to schedule");
      if (waiting_.empty() || draining_) return;
      continue;
    }
    ring_.poll(result, /*wait=*/true);
    --in_flight_;
    apply(result);
    retire_finished();
  }
}

}  // namespace glacier::pipeline
