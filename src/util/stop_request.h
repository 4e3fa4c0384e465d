// The job's stop request, process-wide: set by this rank's signal handler or, on rank 0, by another
// rank's notice (comm's stop relay), and read by the drivers that drain the job.
#pragma once

namespace glacier::stop {

// Async-signal-safe: records `signal_number` received by this process (the first one stays).
void note_local(int signal_number);
// Records a stop that `from_rank` received and reported (the first stop, local or reported, stays).
void note_reported(int signal_number, int from_rank);

bool requested();
// The first stop signal (received here or reported), 0 when none.
int signal_number();
// The rank that received it: -1 for this process, or the reporting rank.
int from_rank();
// The signal this process received itself, 0 when none (what a rank reports to rank 0).
int local_signal();
// "SIGTERM", "SIGUSR1", ... or "signal N".
const char* signal_name(int signal_number);
// Forgets every request (tests, and a driver that handled the request).
void clear();

}  // namespace glacier::stop
