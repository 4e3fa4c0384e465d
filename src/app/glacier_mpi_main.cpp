// glacier_mpi: the batch job's entry point. Starts the MPI session, parses options, runs the job, and is
// the single error boundary: input errors end every rank cleanly with one message and a non-zero code.
#include <cstdio>
#include <exception>

#include "app/job.h"
#include "app/options.h"
#include "app/signals.h"
#include "comm/mpi_channel.h"
#include "comm/mpi_session.h"
#include "comm/startup_watchdog.h"
#include "util/error.h"
#include "util/log.h"

int main(int argc, char** argv) {
  // Before MPI starts: a stop signal during start-up is a request to drain, not the end of the rank.
  glacier::app::install_stop_signals();
  const glacier::comm::MpiSession mpi(argc, argv);
  const int rank = mpi.world_rank();
  if (mpi.world_size() > 1) glacier::log::set_rank(rank);
  int code = glacier::app::kExitOk;
  try {
    auto options = glacier::app::parse_options(argc, argv);
    if (options) {
      glacier::comm::startup::start(options->stall_timeout);
      auto channel = glacier::comm::make_mpi_channel();
      code = glacier::app::run_job(*options, *channel);
    }
  } catch (const glacier::comm::StallError& e) {
    // Results are already saved (rank 0 closes its files before rethrowing); only an abort ends a ring
    // one of whose ranks no longer answers.
    GLACIER_LOG_ERROR("%s", e.what());
    glacier::comm::abort_job(glacier::app::kExitFailure);
  } catch (const glacier::app::JobFailed& e) {
    if (rank == 0) GLACIER_LOG_ERROR("%s", e.what());
    code = e.code();
  } catch (const glacier::InputError& e) {
    if (rank == 0) GLACIER_LOG_ERROR("%s", e.what());
    code = glacier::app::kExitInputError;
  } catch (const std::exception& e) {
    GLACIER_LOG_ERROR("%s", e.what());
    glacier::comm::abort_job(1);
  }
  return code;  // the session finalizes MPI
}
