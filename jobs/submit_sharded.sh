#!/bin/bash
# Submits a sharded run: an array of SHARDS pipelines over one prompt file, then the merge of their
# results into MERGED once every shard has succeeded. Run from the checkout, or from anywhere with
# GLACIER_BIN set (relative paths are the current directory's):
#   SHARDS=8 MODEL=m.gguf PROMPTS=p.jsonl jobs/submit_sharded.sh [sbatch options for the array --] [glacier_mpi options]
set -euo pipefail
SHARDS=${SHARDS:-4}
JOBS_DIR=$(cd "$(dirname "$0")" && pwd)
# The batch scripts find glacier_step.sh and merge_shards.py through GLACIER_JOBS_DIR (sbatch runs copies
# of them elsewhere); by default they look in $SLURM_SUBMIT_DIR/jobs, which holds only when submitting
# from the checkout. This script knows where they are.
export GLACIER_JOBS_DIR=${GLACIER_JOBS_DIR:-$JOBS_DIR}
array_options=()
if [[ " $* " == *" -- "* ]]; then  # sbatch options for the array come before a "--"
  while [ "$1" != -- ]; do array_options+=("$1"); shift; done
  shift
fi
array_id=$(sbatch --parsable --array=0-$((SHARDS - 1)) "${array_options[@]}" "$JOBS_DIR/array_shard.sbatch" "$@")
array_id=${array_id%%;*}  # --parsable prints "id" or "id;cluster"
export OUT_DIR=${OUT_DIR:-shards-$array_id}
export MERGED=${MERGED:-results-$array_id.h5}
# The array learns its OUT_DIR default from its own id; the merge gets it explicitly.
merge_id=$(sbatch --parsable --dependency=afterok:"$array_id" --kill-on-invalid-dep=yes "$JOBS_DIR/merge_shards.sbatch")
echo "array job $array_id ($SHARDS shards into $OUT_DIR), merge job ${merge_id%%;*} -> $MERGED"
