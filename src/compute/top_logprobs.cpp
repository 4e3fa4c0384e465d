// Top-k selection over a logits row: one pass keeping the best k in a small sorted array, since k is at
// most 20 and the vocabulary tens of thousands (no allocation, no full sort).
#include "compute/top_logprobs.h"

#include <algorithm>

#include "util/error.h"

namespace glacier::compute {

int32_t top_logprobs(const float* logits, int32_t n_vocab, int32_t k, double lse, int32_t* ids, float* logprobs) {
  GLACIER_ASSERT(k >= 0 && k <= kMaxTopLogprobs, "top_logprobs k within 0..kMaxTopLogprobs");
  const int32_t n = std::min(k, n_vocab);
  if (n == 0) return 0;
  // ids[0..kept) holds the best so far in descending order. Ids arrive ascending, so a logit equal to
  // the smallest kept one ranks after it (the lower id stays first): only a strictly larger one enters.
  int32_t kept = 0;
  for (int32_t id = 0; id < n_vocab; ++id) {
    const float v = logits[id];
    if (kept == n && !(v > logits[ids[n - 1]])) continue;
    int32_t at = kept < n ? kept++ : n - 1;
    while (at > 0 && v > logits[ids[at - 1]]) {
      ids[at] = ids[at - 1];
      --at;
    }
    ids[at] = id;
  }
  for (int32_t i = 0; i < n; ++i)
    logprobs[i] = static_cast<float>(static_cast<double>(logits[ids[i]]) - lse);
  return n;
}

}  // namespace glacier::compute
