// Logits processing and the per-slot token counts. Each token's logit changes independently of the
// others, so the unordered counts give the same row whatever their iteration order.
#include "compute/logits_processing.h"

#include <limits>

#include "util/error.h"

namespace glacier::compute {

void SequenceLogitState::reset() {
  counts_.clear();
  biases_.clear();
  min_mask_.clear();
}

void SequenceLogitState::apply(float* logits, int32_t n_vocab, const SamplingParams& p, int32_t step) const {
  for (const TokenBias& b : biases_) {
    GLACIER_ASSERT(b.token >= 0 && b.token < n_vocab, "logit_bias token within the vocabulary");
    logits[b.token] += b.bias;
  }
  if (step < p.min_tokens)
    for (int32_t id : min_mask_) {
      GLACIER_ASSERT(id >= 0 && id < n_vocab, "min_tokens id within the vocabulary");
      logits[id] = -std::numeric_limits<float>::infinity();
    }
  if (!p.penalized()) return;
  for (const auto& [id, c] : counts_) {
    GLACIER_ASSERT(id >= 0 && id < n_vocab, "counted token within the vocabulary");
    float& l = logits[id];
    if (p.repetition_penalty != 1.0f) l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
    if (c.output > 0) l -= p.presence_penalty + p.frequency_penalty * static_cast<float>(c.output);
  }
}

void SlotLogitStates::observe(const MicroBatch& mb) {
  for (const SlotCopy& c : mb.copies) {
    auto src = slots_.find(c.src_slot);
    if (src == slots_.end())
      slots_.erase(c.dst_slot);
    else
      slots_[c.dst_slot] = SequenceLogitState(src->second);  // a copy first: inserting may rehash
  }
  for (const Chunk& c : mb.chunks) {
    if (c.output == OutputKind::Score) continue;  // scoring keeps no sampling state
    SequenceLogitState& s = slots_[c.slot];
    if (c.start_pos == 0 || c.starts_sequence) {
      s.reset();
      s.set_biases(mb.biases.data() + c.first_bias, c.n_biases);
      s.set_min_mask(mb.min_mask.data() + c.first_mask, c.n_mask);
    }
    if (!c.sampling.penalized()) continue;
    // Positions from the prompt's length on hold output tokens. Only the chunk that samples knows that
    // length (its end is the prompt plus the `step` outputs so far); a chunk that does not sample is
    // an earlier part of the prompt.
    const int32_t prompt_len =
        c.output == OutputKind::Sample ? c.start_pos + c.n_tokens - c.step : c.start_pos + c.n_tokens;
    for (int32_t j = 0; j < c.n_tokens; ++j) {
      const int32_t id = mb.tokens[static_cast<size_t>(c.token_offset + j)];
      if (c.start_pos + j < prompt_len)
        s.add_prompt_token(id);
      else
        s.add_output_token(id);
    }
  }
}

}  // namespace glacier::compute
