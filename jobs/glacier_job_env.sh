# Sourced by the sbatch scripts in jobs/: what a job takes from Slurm and from the user's site rather than
# hard-coding it: the environment hook (GLACIER_ENV), the CPUs a task was given, the Python for the merge,
# and a look at the glacier_mpi options the user passed on.

# GLACIER_ENV: a file sourced before the run, for `module load ...` or `source venv/bin/activate`. Module
# and venv scripts read unset variables and return non-zero statuses that mean nothing, so it is sourced
# without the script's `set -eu`; a file that cannot be read stops the job before anything runs.
glacier_source_env() {
  [ -n "${GLACIER_ENV:-}" ] || return 0
  if [ ! -r "$GLACIER_ENV" ] || [ -d "$GLACIER_ENV" ]; then
    echo "glacier: GLACIER_ENV=$GLACIER_ENV: expected a readable file to source (module load, venv), found none on $(hostname)" >&2
    exit 2
  fi
  local flags=$-
  set +eu
  # shellcheck disable=SC1090
  source "$GLACIER_ENV"
  local status=$?
  [[ $flags == *e* ]] && set -e
  [[ $flags == *u* ]] && set -u
  if [ "$status" -ne 0 ]; then
    echo "glacier: GLACIER_ENV=$GLACIER_ENV: sourcing it ended with status $status (its last command failed); stopping" >&2
    exit 2
  fi
  echo "glacier: sourced GLACIER_ENV=$GLACIER_ENV"
}

# The CPUs each task of the job step may use: --cpus-per-task as sbatch saw it (SLURM_CPUS_PER_TASK), or
# as sbatch hands it to srun (SRUN_CPUS_PER_TASK, Slurm 22.05+), else the job's CPUs on this node shared by
# its tasks here (SLURM_CPUS_ON_NODE: what a job without --cpus-per-task, or an --exclusive one, was given).
glacier_cpus_per_task() {
  local cpus=${SLURM_CPUS_PER_TASK:-${SRUN_CPUS_PER_TASK:-}}
  if [ -z "$cpus" ]; then
    local tasks=${SLURM_NTASKS_PER_NODE:-}
    if [ -z "$tasks" ]; then
      # One node: all the job's tasks are here. Several: SLURM_TASKS_PER_NODE ("2(x3),1"), this node first.
      if [ "${SLURM_JOB_NUM_NODES:-1}" = 1 ]; then tasks=${SLURM_NTASKS:-1}; else tasks=${SLURM_TASKS_PER_NODE%%[(,]*}; fi
    fi
    cpus=$(( ${SLURM_CPUS_ON_NODE:-1} / (tasks > 0 ? tasks : 1) ))
  fi
  [[ $cpus =~ ^[0-9]+$ ]] && [ "$cpus" -ge 1 ] || cpus=1
  echo "$cpus"
}

# Whether the options (the rest of the arguments) hold --LONG, --LONG=..., -S or -S... (glacier_mpi takes
# no abbreviations, so these are every way to give the option).
glacier_has_option() {
  local long=$1 short=$2 arg
  shift 2
  for arg in "$@"; do
    case "$arg" in
      "--$long" | "--$long="*) return 0 ;;
    esac
    if [ -n "$short" ]; then case "$arg" in "-$short"*) return 0 ;; esac; fi
  done
  return 1
}

# The interpreter for the Python steps (merge_shards.py): PYTHON if set (it must have h5py and numpy), else
# the first of python3 on PATH (a venv or module from GLACIER_ENV) and /usr/bin/python3 that has them.
glacier_python() {
  local check='import h5py, numpy' candidate
  if [ -n "${PYTHON:-}" ]; then
    if ! command -v "$PYTHON" > /dev/null; then
      echo "glacier: PYTHON=$PYTHON: expected a Python interpreter, found no such command on $(hostname)" >&2
      return 2
    fi
    if ! "$PYTHON" -c "$check" 2> /dev/null; then
      echo "glacier: PYTHON=$PYTHON ($(command -v "$PYTHON")): expected an interpreter with h5py and numpy, found one without (load a module or venv with GLACIER_ENV, or unset PYTHON)" >&2
      return 2
    fi
    command -v "$PYTHON"
    return 0
  fi
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" > /dev/null && "$candidate" -c "$check" 2> /dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  echo "glacier: expected a Python with h5py and numpy, found none (tried python3 on PATH: $(command -v python3 || echo none), and /usr/bin/python3); set PYTHON, or load one with GLACIER_ENV" >&2
  return 2
}
