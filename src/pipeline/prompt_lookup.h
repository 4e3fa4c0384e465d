// Prompt-lookup drafting for speculative decoding: the tokens that followed the latest earlier
// occurrence of a sequence's last n tokens in its own prompt and output, proposed as its next tokens.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "pipeline/draft_source.h"

namespace glacier::pipeline {

// Longest suffix looked up (then shorter ones, down to one token).
constexpr int32_t kLookupMaxNgram = 3;

// Fills `draft` (cleared first) with at most max_draft tokens and returns how many. For n from
// min(max_ngram, history.size() - 1) down to 1, the latest i < size - n whose n tokens equal the last n
// gives the draft: the tokens after them. When the history runs out before max_draft tokens, the
// repetition the match implies (period size - n - i) continues into the draft itself. No match: empty.
int32_t lookup_draft(std::span<const int32_t> history, int32_t max_draft, std::vector<int32_t>& draft,
                     int32_t max_ngram = kLookupMaxNgram);

// --speculate lookup as a draft source: no state, no second model.
class LookupDrafts final : public DraftSource {
 public:
  int32_t propose(int32_t /*slot*/, std::span<const int32_t> history, int32_t max_draft,
                  std::vector<int32_t>& draft) override {
    return lookup_draft(history, max_draft, draft);
  }
};

}  // namespace glacier::pipeline
