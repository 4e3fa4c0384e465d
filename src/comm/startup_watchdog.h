// The start-up watchdog: from just after MPI_Init to the last rank's "ready", every rank reports its
// phase and progress; a rank that reports nothing for the stall timeout (stopped, hung on a file system)
// ends the job, named with its phase, instead of holding the allocation until the wall-time limit.
#pragma once
#include <string>

namespace glacier::comm::startup {

// Starts watching on this rank (no communication); 0 = off. Every rank calls it right after MPI_Init.
void start(double stall_timeout_s);
bool active();
// This rank enters a start-up phase ("loading layers 4:8"): reported to the watchers at once.
void phase(const std::string& name);
// Progress within a long local phase ("21.5 of 43.4 MiB checked"): reports at most every beat interval
// and checks the other ranks. Throws StallError when a watched rank has gone silent.
void progress(const std::string& detail);
// The same without new detail: what waits (collectives, transfers) call while they wait.
void tick();
// Collective over the world: a barrier that keeps reporting while it waits.
void sync(const std::string& phase_name);
// Collective: every rank is ready; the watchdog stops (the ring's stall watchdog takes over).
void finish();

}  // namespace glacier::comm::startup
