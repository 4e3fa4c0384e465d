#!/bin/bash
# Submits a sharded run: an array of SHARDS pipelines over one prompt file, then the merge of their
# results into MERGED (HDF5) and MERGED_JSONL once every shard has succeeded. Run from the checkout, or
# from anywhere with GLACIER_BIN set (relative paths are the current directory's):
#   SHARDS=8 MODEL=m.gguf PROMPTS=p.jsonl jobs/submit_sharded.sh [sbatch options for the array --] [glacier_mpi options]
# GLACIER_ENV (sourced by every job) and PYTHON (the merge's interpreter) are passed on with the environment.
set -euo pipefail
SHARDS=${SHARDS:-4}
JOBS_DIR=$(cd "$(dirname "$0")" && pwd)
# The batch scripts find glacier_step.sh and merge_shards.py through GLACIER_JOBS_DIR (sbatch runs copies
# of them elsewhere); by default they look in $SLURM_SUBMIT_DIR/jobs, which holds only when submitting
# from the checkout. This script knows where they are.
export GLACIER_JOBS_DIR=${GLACIER_JOBS_DIR:-$JOBS_DIR}
source "$JOBS_DIR/glacier_job_env.sh"
array_options=()
if [[ " $* " == *" -- "* ]]; then  # sbatch options for the array come before a "--"
  while [ "$1" != -- ]; do array_options+=("$1"); shift; done
  shift
fi
# Each shard writes its own results (OUT_DIR/shard-K-of-N.h5 and .jsonl) and the merge writes MERGED and
# MERGED_JSONL: an --out or --jsonl for glacier_mpi would name one file for every shard. Refused before
# anything is queued (array_shard.sbatch refuses them as well).
for option in out:o jsonl:; do
  if glacier_has_option "${option%%:*}" "${option#*:}" "$@"; then
    echo "submit_sharded: expected no --${option%%:*} in the glacier_mpi options (every shard would write the same file); set MERGED (HDF5) and MERGED_JSONL for the merged results instead; found: $*" >&2
    exit 2
  fi
done
if [ -n "${GLACIER_ENV:-}" ] && [ ! -r "$GLACIER_ENV" ]; then
  echo "submit_sharded: GLACIER_ENV=$GLACIER_ENV: expected a readable file to source in every job, found none" >&2
  exit 2
fi
array_id=$(sbatch --parsable --array=0-$((SHARDS - 1)) "${array_options[@]}" "$JOBS_DIR/array_shard.sbatch" "$@")
array_id=${array_id%%;*}  # --parsable prints "id" or "id;cluster"
export OUT_DIR=${OUT_DIR:-shards-$array_id}
export MERGED=${MERGED:-results-$array_id.h5}
export MERGED_JSONL=${MERGED_JSONL:-${MERGED%.h5}.jsonl}
# The array learns its OUT_DIR default from its own id; the merge gets it explicitly.
merge_id=$(sbatch --parsable --dependency=afterok:"$array_id" --kill-on-invalid-dep=yes "$JOBS_DIR/merge_shards.sbatch")
echo "array job $array_id ($SHARDS shards into $OUT_DIR), merge job ${merge_id%%;*} -> $MERGED, $MERGED_JSONL"
