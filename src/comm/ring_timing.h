// Times a message's trip around a pipeline's ring (rank 0 -> 1 -> ... -> last -> 0) over the channel as
// the pipeline will use it (any injected send delay included), for --decode-groups auto.
#pragma once
#include <cstddef>

#include "comm/channel.h"

namespace glacier::comm {

// Collective over `ch`: `rounds` trips of a `bytes`-byte message, one after another. Returns, on every
// rank, the fastest trip's seconds divided by the ranks (one hop); 0 for a single rank. The fastest, as
// clock alignment takes it: the slower trips wait for cores the host's other work holds, and that sharing
// is counted where the decode steps are timed with every stage computing (on the loaded 2-core VM the
// median trip of a 4-rank ring with no injected delay made a millisecond of it, and auto took 8 groups).
double ring_hop_seconds(Channel& ch, size_t bytes, int rounds);

}  // namespace glacier::comm
