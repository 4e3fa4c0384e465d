// When a decode step carries drafted tokens (--speculate): a pure, per-step decision from how full the
// ring's decode micro-batches are and from each sequence's measured acceptance so far.
#pragma once
#include <cstdint>

namespace glacier::pipeline {

// A decode micro-batch streams every weight of its stage once whatever its rows, so while it carries few
// rows a step costs its weight reads and hops, and a drafted row costs little; with many rows the
// row-proportional work (the GEMMs' arithmetic, attention, the output head) dominates, the stages no
// longer wait on hops, and every drafted row adds its full share to a step every sequence waits for.
// Drafting stops once a decode group already holds this many live sequences.
constexpr int32_t kMaxDraftingSequencesPerGroup = 8;

// The k-th drafted token saves a whole step only if the k drafts before it are accepted too, with
// probability p^k (p: the sequence's per-token acceptance); it costs one row of a weight-bound step,
// about a tenth of the step or less. Tokens whose chance of saving a step is below this are not drafted.
constexpr double kMinDraftPayoff = 0.1;

// The acceptance estimate starts from one accepted and one rejected token (p = 0.5: a short draft first)
// and forgets old verifications at this rate per verification, so a sequence that enters a repetition
// later (where prompt lookup pays most) regains full-length drafts within a few steps.
constexpr double kAcceptancePriorAccepted = 1.0;
constexpr double kAcceptancePriorRejected = 1.0;
constexpr double kAcceptanceMemory = 0.8;

// A sequence whose estimate no longer pays even for one drafted token drafts one probe token every this
// many decode steps (not every step), so a later repetition is still noticed at a small cost.
constexpr int32_t kLowAcceptanceProbeInterval = 16;

// One sequence's drafting record: decayed counts of accepted and rejected drafted tokens.
struct DraftAcceptance {
  double accepted = kAcceptancePriorAccepted;
  double rejected = kAcceptancePriorRejected;
  int32_t steps_since_draft = 0;  // decode steps without drafts since its last verification

  // The estimated chance that the next drafted token is accepted.
  double rate() const { return accepted / (accepted + rejected); }
  // After a verification whose first `accepted_now` drafts were accepted and, if `rejected`, the next
  // one rejected (a verification ends at the first rejection, or earlier at a stop or max_tokens, which
  // says nothing about the drafts after it).
  void record(int32_t accepted_now, bool rejected);
};

enum class DraftVerdict { Draft, RingFull, LowAcceptance };

struct DraftDecision {
  DraftVerdict verdict = DraftVerdict::Draft;
  int32_t max_tokens = 0;  // when Draft: at most this many tokens (1..draft_max)
};

// decode_sequences_per_group: the live decoding sequences a decode micro-batch takes this round.
// The decision for one sequence's next decode step; a LowAcceptance verdict counts a step towards the
// next probe, so it is asked once per decode step.
DraftDecision decide_draft(int32_t decode_sequences_per_group, int32_t draft_max, DraftAcceptance& seq);

// The draft length whose last token still pays (p^k >= kMinDraftPayoff), within 0..draft_max.
int32_t paying_draft_length(double rate, int32_t draft_max);

}  // namespace glacier::pipeline
