// Prompt lookup: a linear scan from the end for each suffix length, longest first, so a longer (more
// specific) context wins over a shorter one and, among equals, the most recent occurrence does.
#include "pipeline/prompt_lookup.h"

#include <algorithm>
#include <cstddef>

namespace glacier::pipeline {

int32_t lookup_draft(std::span<const int32_t> history, int32_t max_draft, std::vector<int32_t>& draft,
                     int32_t max_ngram) {
  draft.clear();
  const auto size = static_cast<int64_t>(history.size());
  if (max_draft <= 0 || size < 2) return 0;
  for (int64_t n = std::min<int64_t>(max_ngram, size - 1); n >= 1; --n) {
    const int32_t* suffix = history.data() + (size - n);
    for (int64_t i = size - n - 1; i >= 0; --i) {
      if (!std::equal(suffix, suffix + n, history.data() + i)) continue;
      // history[i + n ..] followed the match; past the end, the draft repeats with period size - n - i.
      const int64_t period = size - n - i;
      for (int64_t j = 0; j < max_draft; ++j) {
        const int64_t at = size - period + j;
        draft.push_back(at < size ? history[static_cast<size_t>(at)] : draft[static_cast<size_t>(at - size)]);
      }
      return static_cast<int32_t>(draft.size());
    }
  }
  return 0;
}

}  // namespace glacier::pipeline
