#!/bin/bash
# Shared prefixes across prompts: PROMPTS prompts, each one of 10 preambles of 400 tokens plus its own
# 30-token question (token ids, BOS first, preambles in a seeded random order), one new token each, run
# with --prefix-sharing on and off alternately REPS times on 1 and 2 ranks; prints the prompt tokens
# computed and taken from the prefix cache, the job's seconds and its prompt tokens per second (every
# prompt token of the file over the job's time: what a user sees as prefill throughput).
# Usage: benchmarks/prefix/compare.sh BUILD MODEL [PROMPTS=500] [REPS=3] [SLOTS: the job's default]
set -euo pipefail
build=$1 model=$2 prompts=${3:-500} reps=${4:-3} slots=${5:+--slots $5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Ids 3..511: valid in stories260K's vocabulary and in any synthetic one of 512 or more.
python3 - "$dir" "$prompts" <<'PY'
import json, random, sys
d, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(22)
preambles = [[rng.randrange(3, 512) for _ in range(400)] for _ in range(10)]
with open(f"{d}/p.jsonl", "w") as f:
    for i in range(n):
        question = [rng.randrange(3, 512) for _ in range(30)]
        ids = [1] + preambles[rng.randrange(10)] + question
        f.write(json.dumps({"id": f"q{i}", "prompt_token_ids": ids, "max_tokens": 1, "temperature": 0}) + "\n")
PY
run() {  # ranks sharing
  local out
  out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec --oversubscribe --bind-to none -n "$1" \
        "$build/glacier_mpi" --model "$model" --prompts "$dir/p.jsonl" --jsonl "$dir/out-$1-$2.jsonl" --ctx 512 \
        $slots --prefix-sharing "$2" 2>&1)
  printf 'ranks %d, sharing %-3s  %s  %s  %s\n' "$1" "$2" \
    "$(grep -o 'prefill: [0-9]* prompt tokens computed, [0-9]* taken from the prefix cache' <<<"$out")" \
    "$(grep -o 'in [0-9.]* s' <<<"$out" | head -1)" "$(grep -o '[0-9.]* prompt tok/s' <<<"$out")"
}
for ((r = 0; r < reps; ++r)); do
  for ranks in 1 2; do
    run "$ranks" off
    run "$ranks" on
  done
done
# The outputs must not depend on sharing (nor on the ranks).
for f in "$dir"/out-*.jsonl; do cmp -s "$f" "$dir/out-1-off.jsonl" || { echo "results differ: $f" >&2; exit 1; }; done
echo "outputs identical across sharing and ranks"
