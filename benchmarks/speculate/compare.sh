#!/bin/bash
# Speculative decoding against none: one sequence at a time (--slots 1) over a set of repetitive greedy
# prompts, on 1 and 4 ranks at 0 and 1 ms injected hop latency, with --speculate off and $SPECULATE
# (default lookup; or draft:PATH, a draft model) alternately REPS times; prints generated tok/s (medians),
# the speed-up and the drafts' counts (accepted drafts, tokens per verification), and checks both runs wrote
# the same bytes. Then (unless BATCH=0) a full batch: 32 prompts (the set repeated) in 32 slots, where the
# per-step policy keeps drafts out while the decode groups are full; the same figures plus the steps it
# skipped for that.
# Usage: [SPECULATE=lookup|draft:PATH] [BATCH=1] benchmarks/speculate/compare.sh BUILD MODEL [REPS=3] [MAX_TOKENS=64] [DRAFT_MAX=4]
set -euo pipefail
build=$1 model=$2 reps=${3:-3} max_tokens=${4:-64} draft_max=${5:-4}
speculate=${SPECULATE:-lookup}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
python3 - "$dir/p.jsonl" <<'PY'
import json, sys
texts = ["Once upon a time there was a cat. The cat sat on the mat. The cat sat on the mat. The cat sat on the",
         "Tom said: I like the ball. I like the ball. I like the ball. I like",
         "One two three four. One two three four. One two three four. One two",
         "Lily went to the park. She saw a dog. Lily went to the park. She saw a",
         "The sun is hot. The sun is big. The sun is hot. The sun is",
         "Ben had a red car and a blue car. Ben had a red car and a blue car. Ben had a"]
with open(sys.argv[1], "w") as f:
    for i, t in enumerate(texts):
        f.write(json.dumps({"id": "r%d" % i, "prompt": t, "temperature": 0}) + "\n")
with open(sys.argv[1].replace("p.jsonl", "p32.jsonl"), "w") as f:
    for i in range(32):
        f.write(json.dumps({"id": "b%d" % i, "prompt": texts[i % len(texts)], "temperature": 0}) + "\n")
PY
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
prompts=p.jsonl slots=1
run() {  # ranks latency off|on rep -> the job's log
  timeout -k 10 600 mpiexec --oversubscribe --bind-to none -n "$1" "$build/glacier_mpi" --model "$model" \
    --prompts "$dir/$prompts" --jsonl "$dir/out-$1-$2-$3.jsonl" --max-tokens "$max_tokens" --slots "$slots" --threads 1 \
    --bind none --inject-latency-ms "$2" $([ "$3" = off ] && echo --speculate off || echo --speculate "$speculate" --draft-max "$draft_max") \
    > "$dir/log-$1-$2-$3-$4" 2>&1
}
rate() { sed -n 's/^done: .* \([0-9.]*\) generated tok\/s.*/\1/p' "$1"; }
# Both tables time the same alternation and check the same bytes; only the failure's wording and the last
# columns (what the speculating run's log says) differ.
row() {  # ranks latency what(for the failure) sed-expression(last columns from the log) -> a table row
  local rep off on
  for rep in $(seq "$reps"); do run "$1" "$2" off "$rep"; run "$1" "$2" on "$rep"; done
  cmp -s "$dir/out-$1-$2-off.jsonl" "$dir/out-$1-$2-on.jsonl" ||
    { echo "compare.sh: the outputs differ with speculation on and off ($3)" >&2; exit 1; }
  off=$(for rep in $(seq "$reps"); do rate "$dir/log-$1-$2-off-$rep"; done | median)
  on=$(for rep in $(seq "$reps"); do rate "$dir/log-$1-$2-on-$rep"; done | median)
  printf '| %d | %s ms | %s | %s | %.2fx | %s |\n' "$1" "$2" "$off" "$on" "$(echo "$on / $off" | bc -l)" \
    "$(sed -n "$4" "$dir/log-$1-$2-on-1")"
}
echo "model $(basename "$model"); --speculate $speculate; --slots 1, $max_tokens new tokens a prompt, --draft-max $draft_max; median of $reps"
printf '| ranks | hop latency | off tok/s | speculating tok/s | speed-up | accepted | tokens per verification |\n|---|---|---|---|---|---|---|\n'
for ranks in 1 4; do
  for lat in 0 1; do
    row "$ranks" "$lat" "$ranks ranks, $lat ms" \
      's/^speculation: .* \([0-9]* accepted ([0-9.]*%)\), \([0-9.]*\) tokens per verification.*/\1 | \2/p'
  done
done
prompts=p32.jsonl slots=32
[ "${BATCH:-1}" = 0 ] && exit 0
echo
echo "32 prompts, --slots 32: speculation decided per step (median of $reps)"
printf '| ranks | hop latency | off tok/s | speculating tok/s | speed-up | verify steps | skipped: groups full | skipped: low acceptance |\n|---|---|---|---|---|---|---|---|\n'
for ranks in 1 4; do
  for lat in 0 1; do
    row "$ranks" "$lat" "32 prompts, $ranks ranks" \
      's/^speculation: \([0-9]*\) verify steps.*, \([0-9]*\) steps without drafts as the decode groups were full, \([0-9]*\) for low acceptance.*/\1 | \2 | \3/p'
  done
done
