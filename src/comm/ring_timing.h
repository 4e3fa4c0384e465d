// Times a message's trip around a pipeline's ring (rank 0 -> 1 -> ... -> last -> 0) over the channel as
// the pipeline will use it (any injected send delay included), for --decode-groups auto.
#pragma once
#include <cstddef>

#include "comm/channel.h"

namespace glacier::comm {

// Collective over `ch`: `rounds` trips of a `bytes`-byte message, one after another. Returns, on every
// rank, the median trip's seconds divided by the ranks (one hop); 0 for a single rank. The median, not
// the fastest: the pipeline's messages meet the same scheduling delays on a shared host.
double ring_hop_seconds(Channel& ch, size_t bytes, int rounds);

}  // namespace glacier::comm
