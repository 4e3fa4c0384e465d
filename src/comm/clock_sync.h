// Aligns every rank's clock to rank 0's, so trace intervals of different ranks (and hosts) share one
// time axis: a message is never shown arriving before it left.
#pragma once
#include <functional>

#include "comm/channel.h"
#include "comm/message_tags.h"

namespace glacier::comm {

// Tag of the alignment's messages; they are exchanged before any other point-to-point traffic.
constexpr int kTagClockSync = tags::kClockSync;

struct ClockOffset {
  double offset_s = 0.0;  // rank 0's clock minus this rank's (0 on rank 0)
  double error_s = 0.0;   // bound on the estimate's error: half the fastest round trip (0 on rank 0)
};

// Collective over `ch`: each rank trades `rounds` ping-pongs with rank 0 and keeps the one with the
// fastest round trip (Cristian's method: rank 0's reading is taken at the round trip's midpoint).
// `clock` is the clock to align (seconds; tests pass skewed ones).
ClockOffset offset_to_root(Channel& ch, const std::function<double()>& clock, int rounds = 16);

}  // namespace glacier::comm
