#!/usr/bin/env bash
# Layer split with one slow rank: the same job on 2 ranks x 1 thread with rank 1 slowed (--slow-rank
# 1:FACTOR, a testing aid), split by weight bytes vs by measured speed, alternated REPS times so both see
# the same machine load. Prints each run's split and generated tok/s, then the medians; writes CSV.
# Usage: benchmarks/pipeline/bench_partition.sh [BUILD_DIR] [MODEL.gguf]
set -euo pipefail
BUILD=${1:-build}
MODEL=${2:-}
FACTOR=${FACTOR:-3}
REPS=${REPS:-5}
PROMPTS=${PROMPTS:-32}
NEW_TOKENS=${NEW_TOKENS:-32}
source "$(dirname "$0")/bench_common.sh"
if [ -z "$MODEL" ]; then
  MODEL=$WORK/bench.gguf
  synthetic_llama "$MODEL"
fi
python3 - "$WORK" "$PROMPTS" <<'PY'
import json, sys
words = ("the little cat sat on a warm mat and looked at the bright sun while the dog ran after a red ball "
         "in the green park near the old tall tree where birds sang every morning").split()
with open(sys.argv[1] + "/prompts.jsonl", "w") as f:
    for i in range(int(sys.argv[2])):
        n = 8 + (i * 5) % 24
        f.write(json.dumps({"id": "p%d" % i, "prompt": " ".join(words[(i + k) % len(words)] for k in range(n))}) + "\n")
PY
run() {  # partition -> "split tok/s"
  local log=$WORK/run.log
  $MPIRUN -np 2 "$BUILD/glacier_mpi" --model "$MODEL" --prompts "$WORK/prompts.jsonl" --jsonl "$WORK/out.jsonl" \
    --max-tokens "$NEW_TOKENS" --threads 1 --bind none --slow-rank 1:"$FACTOR" --partition "$1" > "$log" 2>&1
  local split rate
  split=$(sed -n 's/.*layer split \([0-9:,]*\).*/\1/p' "$log" | head -1)
  rate=$(sed -n 's/.* \([0-9.]*\) generated tok\/s.*/\1/p' "$log")
  echo "$split $rate"
}
echo "model: $MODEL ($(du -h "$MODEL" | cut -f1)); np 2 x 1 thread, rank 1 slowed ${FACTOR}x; $PROMPTS prompts x $NEW_TOKENS new tokens"
csv=${CSV:-benchmarks/pipeline/last_partition_run.csv}
echo "rep,partition,split,generated_tok_per_s" > "$csv"
run bytes > /dev/null  # warm-up: page cache, first-touch
printf '%-4s %-10s %-10s %14s\n' rep partition split "gen tok/s"
bytes_rates=() measured_rates=()
for rep in $(seq 1 "$REPS"); do
  for p in bytes measured; do
    read -r split rate <<< "$(run $p)"
    printf '%-4s %-10s %-10s %14s\n' "$rep" "$p" "$split" "$rate"
    echo "$rep,$p,$split,$rate" >> "$csv"
    if [ $p = bytes ]; then bytes_rates+=("$rate"); else measured_rates+=("$rate"); fi
  done
done
mb=$(echo "${bytes_rates[@]}" | median)
mm=$(echo "${measured_rates[@]}" | median)
printf 'median generated tok/s: bytes %s, measured %s, ratio %.2f\n' "$mb" "$mm" "$(awk -v a="$mm" -v b="$mb" 'BEGIN{print a/b}')"
