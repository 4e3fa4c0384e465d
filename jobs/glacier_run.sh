#!/bin/bash
# Runs an mpirun command line so that SIGTERM, SIGINT, SIGHUP or SIGUSR1 to this script drain the job
# and the script exits 75 (stopped, rerun with --resume), as glacier_mpi's ranks do.
# Usage: jobs/glacier_run.sh mpirun -np 4 ... build/glacier_mpi --model ... --out results.h5
#
# Why a wrapper: Open MPI 4.1's mpirun answers SIGTERM, SIGINT and SIGHUP itself: it sends SIGTERM to
# every rank (they start draining), SIGKILLs them 2 x odls_base_sigkill_timeout later (1 s by default,
# whether they have finished or not) and exits 1; those three signals cannot be put in its
# ess_base_forward_signals list. SIGUSR1 it passes on to every rank and then waits for them, exiting
# with their code: 75 once they have drained. So this script turns any stop signal into SIGUSR1.
set -u
readonly GLACIER_EXIT_STOPPED=75

# Its own session: a terminal's Ctrl-C (SIGINT to the whole foreground group) then reaches only this
# script, not mpirun. Started in the background of a non-interactive shell, the command is not a group
# leader, so setsid makes the session without forking and $! is mpirun itself.
setsid "$@" &
launcher=$!
forward() {
  echo "glacier_run: $1: asking every rank to drain and stop (SIGUSR1 to the launcher)" >&2
  kill -USR1 "$launcher" 2>/dev/null
}
trap 'forward SIGTERM' TERM
trap 'forward SIGINT' INT
trap 'forward SIGHUP' HUP
trap 'forward SIGUSR1' USR1
# `wait` returns early when a trapped signal arrives: wait again until the launcher itself has ended.
while :; do
  status=0
  wait "$launcher" || status=$?
  kill -0 "$launcher" 2>/dev/null || break
done
[ "$status" -eq "$GLACIER_EXIT_STOPPED" ] && echo "glacier_run: stopped early (exit 75): rerun with --resume to finish" >&2
exit "$status"
