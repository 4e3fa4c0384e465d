// The per-step speculation decision: ring fullness first (it holds for every sequence of the round),
// then the sequence's acceptance, which sets how many tokens it drafts.
#include "pipeline/speculation_policy.h"

#include <algorithm>
#include <cmath>

namespace glacier::pipeline {

void DraftAcceptance::record(int32_t accepted_now, bool rejected_one) {
  accepted = accepted * kAcceptanceMemory + accepted_now;
  rejected = rejected * kAcceptanceMemory + (rejected_one ? 1 : 0);
  steps_since_draft = 0;
}

int32_t paying_draft_length(double rate, int32_t draft_max) {
  if (draft_max <= 0 || rate < kMinDraftPayoff) return 0;
  if (rate >= 1.0) return draft_max;
  // p^k >= payoff  <=>  k <= log(payoff) / log(p) (both logs negative).
  const double k = std::floor(std::log(kMinDraftPayoff) / std::log(rate));
  return static_cast<int32_t>(std::clamp(k, 1.0, static_cast<double>(draft_max)));
}

DraftDecision decide_draft(int32_t decode_sequences_per_group, int32_t draft_max, DraftAcceptance& seq) {
  if (decode_sequences_per_group >= kMaxDraftingSequencesPerGroup) return {DraftVerdict::RingFull, 0};
  const int32_t length = paying_draft_length(seq.rate(), draft_max);
  if (length > 0) return {DraftVerdict::Draft, length};
  if (++seq.steps_since_draft >= kLowAcceptanceProbeInterval) return {DraftVerdict::Draft, std::min(1, draft_max)};
  return {DraftVerdict::LowAcceptance, 0};
}

}  // namespace glacier::pipeline
