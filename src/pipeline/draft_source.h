// Where speculative decoding's drafts come from (--speculate): a source proposes the tokens it expects
// to follow a sequence's prompt and output so far; the scheduler verifies them in one chunk. Drafts are
// a function of the history alone, so a run's results never depend on how sequences were batched.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace glacier::pipeline {

class DraftSource {
 public:
  virtual ~DraftSource() = default;
  // Fills `draft` (cleared first) with at most max_draft tokens proposed to follow `history` (the prompt
  // and the output so far) of the sequence in KV slot `slot`, and returns how many.
  virtual int32_t propose(int32_t slot, std::span<const int32_t> history, int32_t max_draft,
                          std::vector<int32_t>& draft) = 0;
};

}  // namespace glacier::pipeline
