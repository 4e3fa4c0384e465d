// A Channel whose ranks are threads of one process: lets the whole pipeline ring (driver ring and
// stage loops) run in a unit test without MPI. Messages are copied on send; receives posted by a
// rank for one (source, tag) match that link's messages in order, as MPI's do.
#pragma once
#include <memory>
#include <vector>

#include "comm/channel.h"

namespace glacier::comm {

class InProcessHub;

// One channel per rank, all sharing a hub; each rank's channel is used by one thread.
std::vector<std::unique_ptr<Channel>> make_inprocess_channels(int n_ranks);

}  // namespace glacier::comm
