// Channel over MPI_COMM_WORLD (the caller initializes and finalizes MPI in main).
#pragma once
#include <memory>

#include "comm/channel.h"

namespace glacier::comm {

std::unique_ptr<Channel> make_mpi_channel();
// Ends the whole job from any rank after a fatal fault (MPI_Abort), so no allocation hangs.
[[noreturn]] void abort_job(int code);

}  // namespace glacier::comm
