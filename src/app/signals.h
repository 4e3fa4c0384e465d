// Stop requests from the batch system: SIGTERM (time limit, scancel) and SIGUSR1 (Slurm --signal)
// only set a flag; the job drains, flushes its results and exits with kExitInterrupted.
#pragma once

namespace glacier::app {

// Installs the handlers (sigaction, SA_RESTART so MPI and file calls are not interrupted). A repeated
// signal keeps the first one: MPI launchers may forward the same SIGTERM a rank also got directly.
// Throws std::runtime_error when sigaction fails.
void install_stop_signals();

bool stop_requested();
// The first stop signal received, 0 when none.
int stop_signal();
// Forgets a received signal (tests, and a driver that handled the request).
void clear_stop_request();

}  // namespace glacier::app
