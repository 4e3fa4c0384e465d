# Sourced by the sbatch scripts in jobs/: runs one glacier_mpi job step, forwards the pre-timeout signal
# to it, and requeues the job when glacier_mpi stopped early (exit 75) so that it resumes where it was.
# Usage inside a batch script: source "$GLACIER_JOBS_DIR/glacier_step.sh"; glacier_step srun ... glacier_mpi ...

readonly GLACIER_EXIT_STOPPED=75   # glacier_mpi drained, flushed and stopped on SIGTERM/SIGINT/SIGHUP/SIGUSR1
GLACIER_MAX_REQUEUES=${GLACIER_MAX_REQUEUES:-10}  # a job that never gets further must not loop forever

# Runs the command (srun ...) in the background, so that the batch shell can take the signal Slurm sends
# before the time limit (#SBATCH --signal=B:USR1@SECONDS) and pass it on while the step runs; srun hands
# it to every task. On exit 75 the job is requeued: it restarts with the same job id, so the same --out
# file, and the script adds --resume when that file exists. SIGTERM, SIGINT and SIGHUP to the batch shell
# are passed on as SIGUSR1 too: the one signal both srun and mpirun hand to every rank and then wait for
# (Open MPI's mpirun answers the other three itself and exits 1; see glacier_run.sh).
glacier_step() {
  local status=0
  trap 'echo "glacier_step: pre-timeout signal: asking every rank to drain and stop" >&2; kill -USR1 "$glacier_step_pid" 2>/dev/null' USR1
  trap 'echo "glacier_step: stop signal: asking every rank to drain and stop" >&2; kill -USR1 "$glacier_step_pid" 2>/dev/null' TERM INT HUP
  "$@" &
  glacier_step_pid=$!
  # `wait` returns early when a trapped signal arrives: wait again until the step itself has ended.
  while :; do
    status=0
    wait "$glacier_step_pid" || status=$?
    kill -0 "$glacier_step_pid" 2>/dev/null || break
  done
  trap - USR1 TERM INT HUP
  if [ "$status" -eq "$GLACIER_EXIT_STOPPED" ]; then
    local restarts=${SLURM_RESTART_COUNT:-0}
    if [ "$restarts" -lt "$GLACIER_MAX_REQUEUES" ]; then
      echo "glacier_step: stopped early (exit 75); requeueing job $SLURM_JOB_ID (restart $((restarts + 1))) to resume" >&2
      scontrol requeue "$SLURM_JOB_ID"
    else
      echo "glacier_step: stopped early again after $restarts restarts; not requeueing (GLACIER_MAX_REQUEUES)" >&2
    fi
  fi
  return "$status"
}

# "--resume" when the results file exists (a requeued job finishing its own earlier run), else nothing.
glacier_resume_flag() { [ -f "$1" ] && echo --resume || true; }
