#!/usr/bin/env bash
# Pipeline efficiency on one host: the same prompts on 1 rank with T threads and on 2 ranks with T/2
# threads each, prefill (64 prompts, 1 new token each) and decode (16 prompts, 64 new tokens each).
# Efficiency = throughput(np 2) / throughput(np 1): 1.0 means the pipeline costs nothing.
# Usage: benchmarks/pipeline/bench_pipeline.sh [BUILD_DIR] [MODEL.gguf]   (prints a table, writes CSV)
set -euo pipefail
BUILD=${1:-build}
MODEL=${2:-}
THREADS=${THREADS:-2}
UBATCH=${UBATCH:-128}
LAYERS=${LAYERS:-}  # e.g. 0:4,4:8 to override the byte-balanced split for np 2
source "$(dirname "$0")/bench_common.sh"
if [ -z "$MODEL" ]; then
  MODEL=$WORK/bench.gguf
  synthetic_llama "$MODEL"
fi
# 64 prompts of different lengths (about 40-90 tokens each).
python3 - "$WORK" <<'PY'
import json, sys
words = ("the little cat sat on a warm mat and looked at the bright sun while the dog ran after a red ball "
         "in the green park near the old tall tree where birds sang every morning").split()
with open(sys.argv[1] + "/prefill.jsonl", "w") as f:
    for i in range(64):
        n = 30 + (i * 7) % 40
        f.write(json.dumps({"id": "p%d" % i, "prompt": " ".join(words[(i + k) % len(words)] for k in range(n))}) + "\n")
with open(sys.argv[1] + "/decode.jsonl", "w") as f:
    for i in range(16):
        f.write(json.dumps({"id": "d%d" % i, "prompt": " ".join(words[i:i + 8])}) + "\n")
PY
run() {  # np threads prompts max_tokens field(prompt|generated) -> tok/s, peak RSS per rank
  local np=$1 threads=$2 prompts=$3 max=$4 field=$5
  local log=$WORK/run.log
  $MPIRUN -np "$np" "$BUILD/glacier_mpi" --model "$MODEL" --prompts "$WORK/$prompts" --jsonl "$WORK/out.jsonl" \
    --max-tokens "$max" --threads "$threads" --bind none --ubatch "$UBATCH" $( [ "$np" = 2 ] && [ -n "$LAYERS" ] && echo --layers "$LAYERS" ) > "$log" 2>&1
  local rate
  if [ "$field" = prompt ]; then
    rate=$(sed -n 's/.*s: \([0-9.]*\) prompt tok\/s.*/\1/p' "$log")
  else
    rate=$(sed -n 's/.* \([0-9.]*\) generated tok\/s.*/\1/p' "$log")
  fi
  local rss
  rss=$(grep -o 'peak RSS [0-9.]* MiB' "$log" | awk '{printf "%s%s", sep, $3; sep="/"}')
  echo "$rate $rss"
}
echo "model: $MODEL ($(du -h "$MODEL" | cut -f1)); $THREADS threads in total"
printf '%-8s %-28s %12s %16s\n' phase configuration "tok/s" "peak RSS MiB"
csv=${CSV:-benchmarks/pipeline/last_run.csv}
echo "phase,np,threads_per_rank,tok_per_s" > "$csv"
for phase in prefill decode; do
  if [ $phase = prefill ]; then prompts=prefill.jsonl; max=1; field=prompt; else prompts=decode.jsonl; max=64; field=generated; fi
  run 1 "$THREADS" $prompts $max $field > /dev/null  # warm-up: page cache, first-touch
  read -r one rss1 <<< "$(run 1 "$THREADS" $prompts $max $field)"
  read -r two rss2 <<< "$(run 2 $((THREADS / 2)) $prompts $max $field)"
  printf '%-8s %-28s %12s %16s\n' $phase "np 1 x $THREADS threads" "$one" "$rss1"
  printf '%-8s %-28s %12s %16s\n' $phase "np 2 x $((THREADS / 2)) threads" "$two" "$rss2"
  printf '%-8s %-28s %12.3f\n' $phase "efficiency (np2 / np1)" "$(awk -v a="$two" -v b="$one" 'BEGIN{print a/b}')"
  echo "$phase,1,$THREADS,$one" >> "$csv"
  echo "$phase,2,$((THREADS / 2)),$two" >> "$csv"
done
