// Stop requests from the batch system or a user: SIGTERM (time limit, scancel, mpirun passing on its own
// SIGTERM/SIGINT/SIGHUP), SIGINT, SIGHUP and SIGUSR1 (Slurm --signal, mpirun forwards it) only set a
// flag; any rank's request reaches rank 0 (comm's stop relay), the job drains, flushes its results and
// every rank exits with kExitInterrupted.
#pragma once

#include <string>

namespace glacier::app {

// Installs the handlers (sigaction, SA_RESTART so MPI and file calls are not interrupted). A repeated
// signal keeps the first one: MPI launchers may forward the same SIGTERM a rank also got directly.
// Throws std::runtime_error when sigaction fails.
void install_stop_signals();

// True once this rank received a stop signal, or (rank 0) another rank reported one.
bool stop_requested();
// The first stop signal received or reported, 0 when none.
int stop_signal();
// "SIGTERM to rank 2", "SIGUSR1" (this rank): for the drain's message.
std::string describe_stop();
// Forgets a received signal (tests, and a driver that handled the request).
void clear_stop_request();

}  // namespace glacier::app
