// OutputHead: collects the rows that need logits, runs the head on them group by group, and turns
// each row into a sampled token or a target log-probability.
#include "compute/output_head.h"

#include <algorithm>
#include <cmath>

#include "compute/top_logprobs.h"
#include "util/error.h"

namespace glacier::compute {
namespace {

// Whether the final norm can scale this hidden state. A NaN or Inf in it, or values so large that their
// sum of squares overflows (RMSNorm then multiplies by 1/sqrt(inf) = 0), leave the head nothing but
// zeros or NaN, which Q8_0 quantization can turn into finite, uniform logits: junk that looks valid.
bool normable(const float* x, int32_t n) {
  float sum_squares = 0.0f;
  for (int32_t i = 0; i < n; ++i) sum_squares += x[i] * x[i];
  return std::isfinite(sum_squares);
}

}  // namespace

OutputHead::OutputHead(TransformerStage& stage)
    : stage_(stage), sampler_(stage.config().n_vocab),
      logits_(static_cast<size_t>(kRowsPerGroup) * stage.config().n_vocab) {
  rows_.reserve(static_cast<size_t>(stage.max_tokens()));
  row_chunk_.reserve(static_cast<size_t>(stage.max_tokens()));
  group_.reserve(kRowsPerGroup);
}

void OutputHead::evaluate(const MicroBatch& mb, const float* x, MicroBatchResult& out) {
  out.clear();
  out.id = mb.id;
  const int32_t n_vocab = stage_.config().n_vocab;
  slot_states_.observe(mb);
  // Which rows need logits, and their result slot.
  std::vector<int32_t>& rows = rows_;
  rows.clear();
  row_chunk_.clear();
  for (size_t ci = 0; ci < mb.chunks.size(); ++ci) {
    const Chunk& c = mb.chunks[ci];
    ChunkResult r;
    r.seq = c.seq;
    r.first_target = static_cast<int32_t>(out.target_logprobs.size());
    // Rows with a target: a Score chunk's, or a generate chunk's prompt positions (prompt log-probs).
    for (int32_t j = 0; j < c.n_tokens; ++j) {
      if (mb.targets[c.token_offset + j] < 0) continue;
      rows.push_back(c.token_offset + j);
      row_chunk_.push_back(static_cast<int32_t>(ci));
      ++r.n_targets;
      out.target_logprobs.push_back(0.0f);
      out.target_greedy.push_back(0);
    }
    if (c.target_top > 0 && r.n_targets > 0) {
      // Their alternatives' place, reserved now so a chunk's are contiguous (a sampled row's follow later).
      r.first_target_top = static_cast<int32_t>(out.top_ids.size());
      r.n_target_top = std::min(c.target_top, n_vocab);
      out.top_ids.resize(out.top_ids.size() + static_cast<size_t>(r.n_targets) * r.n_target_top);
      out.top_logprobs.resize(out.top_ids.size());
    }
    if (c.output == OutputKind::Sample) {  // its last row, which has no target
      GLACIER_ASSERT(mb.targets[c.token_offset + c.n_tokens - 1] < 0, "a sampled row has no target");
      rows.push_back(c.token_offset + c.n_tokens - 1);
      row_chunk_.push_back(static_cast<int32_t>(ci));
    } else if (c.output == OutputKind::Verify) {
      // The token counts of penalized sampling would take in the drafts the driver may reject.
      GLACIER_ASSERT(!c.sampling.penalized() && c.n_samples == 1 && r.n_targets == 0,
                     "a verify chunk of one unpenalized sequence, with no prompt position");
      for (int32_t j = 0; j < c.n_tokens; ++j) {
        rows.push_back(c.token_offset + j);
        row_chunk_.push_back(static_cast<int32_t>(ci));
      }
      r.n_extra = c.n_tokens - 1;
    }
    out.chunks.push_back(r);
  }
  std::vector<int32_t>& group = group_;
  size_t target_index = 0;
  for (size_t g = 0; g < rows.size(); g += kRowsPerGroup) {
    const size_t n = std::min<size_t>(kRowsPerGroup, rows.size() - g);
    group.assign(rows.begin() + g, rows.begin() + g + n);
    stage_.head(x, group, logits_.data());
    for (size_t i = 0; i < n; ++i) {
      float* lg = logits_.data() + i * n_vocab;
      const int32_t n_embd = stage_.config().n_embd;
      const Chunk& c = mb.chunks[row_chunk_[g + i]];
      ChunkResult& r = out.chunks[row_chunk_[g + i]];
      const bool finite = all_finite(lg, n_vocab) && normable(x + static_cast<size_t>(group[i]) * n_embd, n_embd);
      const int32_t target = mb.targets[group[i]];
      if (c.output == OutputKind::Verify) {  // its rows are decode steps: none has a target
        const int32_t row = group[i] - c.token_offset;
        if (!finite && r.non_finite == 0) r.non_finite = 1 + row;
        const int32_t step = c.step + row;  // the step this row's token would have in plain decoding
        slot_states_.slot(c.slot).apply(lg, n_vocab, c.sampling, step);
        // Row j < n_tokens - 1 verifies the draft fed at row j + 1; the last row (every draft accepted)
        // draws as plain decoding does. The scheduler keeps the drafts up to the first whose row did not
        // accept it (that row's token is then the one drawn in its place, never the draft).
        const TokenChoice t =
            row + 1 < c.n_tokens
                ? sampler_.verify(lg, c.sampling, c.prompt_key, step, mb.tokens[c.token_offset + row + 1]).choice
                : sampler_.choose(lg, c.sampling, c.prompt_key, step);
        if (row == 0) {  // the chunk's rows come one after the other: its draws and alternatives start here
          r.first_sample = static_cast<int32_t>(out.sample_tokens.size());
          r.first_top = static_cast<int32_t>(out.top_ids.size());
          r.token = t.token;
          r.logprob = t.logprob;
        } else {
          out.sample_tokens.push_back(t.token);
          out.sample_logprobs.push_back(t.logprob);
        }
        if (c.sampling.top_logprobs > 0) {
          const size_t at = out.top_ids.size();
          out.top_ids.resize(at + static_cast<size_t>(kMaxTopLogprobs));
          out.top_logprobs.resize(at + static_cast<size_t>(kMaxTopLogprobs));
          r.n_top = top_logprobs(lg, n_vocab, c.sampling.top_logprobs, t.lse, out.top_ids.data() + at,
                                 out.top_logprobs.data() + at);
          out.top_ids.resize(at + static_cast<size_t>(r.n_top));
          out.top_logprobs.resize(at + static_cast<size_t>(r.n_top));
        }
        continue;
      }
      if (!finite) r.non_finite = 1;
      if (target < 0) {
        GLACIER_ASSERT(c.output == OutputKind::Sample, "a row without a target is a sampled row");
        // After the finite check: the min_tokens mask writes -inf on purpose.
        slot_states_.slot(c.slot).apply(lg, n_vocab, c.sampling, c.step);
        TokenChoice t = sampler_.choose(lg, c.sampling, c.prompt_key, c.step);
        r.token = t.token;
        r.logprob = t.logprob;
        if (c.sampling.top_logprobs > 0) {
          // The same processed row and log-sum-exp as the chosen token's log-prob, so a greedy row's
          // first alternative is its token with exactly its log-prob.
          const size_t at = out.top_ids.size();
          out.top_ids.resize(at + static_cast<size_t>(kMaxTopLogprobs));
          out.top_logprobs.resize(at + static_cast<size_t>(kMaxTopLogprobs));
          r.first_top = static_cast<int32_t>(at);
          r.n_top = top_logprobs(lg, n_vocab, c.sampling.top_logprobs, t.lse, out.top_ids.data() + at,
                                 out.top_logprobs.data() + at);
          out.top_ids.resize(at + static_cast<size_t>(r.n_top));
          out.top_logprobs.resize(at + static_cast<size_t>(r.n_top));
        }
        // The prompt's other samples draw from the same row (the same prefill), each from its own stream,
        // so their first tokens share this row's alternatives (first_top, n_top).
        r.first_sample = static_cast<int32_t>(out.sample_tokens.size());
        r.n_extra = c.n_samples - 1;
        for (int32_t j = 1; j < c.n_samples; ++j) {
          const TokenChoice tj = sampler_.choose(lg, c.sampling, sample_stream_key(c.prompt_key, j), c.step);
          out.sample_tokens.push_back(tj.token);
          out.sample_logprobs.push_back(tj.logprob);
        }
      } else {
        // The raw logits, as --mode score reads them: the same figure whichever way the position is asked.
        auto [lp, greedy] = target_logprob(lg, n_vocab, target);
        out.target_logprobs[target_index] = static_cast<float>(lp);
        out.target_greedy[target_index] = greedy ? 1 : 0;
        if (r.n_target_top > 0) {
          const size_t at = static_cast<size_t>(r.first_target_top) +
                            static_cast<size_t>(target_index - static_cast<size_t>(r.first_target)) * r.n_target_top;
          const int32_t n = top_logprobs(lg, n_vocab, r.n_target_top, log_sum_exp(lg, n_vocab), out.top_ids.data() + at,
                                         out.top_logprobs.data() + at);
          GLACIER_ASSERT(n == r.n_target_top, "every target's alternatives");
        }
        ++target_index;
      }
    }
  }
}

}  // namespace glacier::compute
