// MPI_Init_thread and MPI_Finalize for the programs (mpi_session.h).
#include "comm/mpi_session.h"

#include <mpi.h>

namespace glacier::comm {

MpiSession::MpiSession(int& argc, char**& argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() { MPI_Finalize(); }

}  // namespace glacier::comm
