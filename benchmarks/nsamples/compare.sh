#!/bin/bash
# n samples on one prefill against n copies of the prompt: the same 512-token prompt as one line with
# "n": N and as N lines with n = 1 (and the first again with --n-prefill each), run alternately REPS
# times on one rank; prints the prefilled token count and the job's seconds for each run.
# Usage: benchmarks/nsamples/compare.sh BUILD MODEL [N=16] [REPS=3] [MAX_TOKENS=32]
set -euo pipefail
build=$1 model=$2 n=${3:-16} reps=${4:-3} max_tokens=${5:-32}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# 512 token ids from a short story's tokens (stories260K's vocabulary; any vocabulary of 512 or more ids works).
python3 - "$dir" "$n" "$max_tokens" <<'PY'
import json, sys
d, n, max_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
story = [403, 407, 261, 378, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 397, 355, 267, 337,
         410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 335, 311, 374, 419, 426]
ids = [1] + (story * 16)[:511]
common = {"prompt_token_ids": ids, "temperature": 1.0, "seed": 1, "max_tokens": max_tokens}
with open(f"{d}/n.jsonl", "w") as f:
    f.write(json.dumps(dict(id="p", n=n, **common)) + "\n")
with open(f"{d}/copies.jsonl", "w") as f:
    for i in range(n):
        f.write(json.dumps(dict(id=f"p{i}", **common)) + "\n")
PY
run() {  # label prompts extra-options
  local out
  out=$("$build/glacier_mpi" --model "$model" --prompts "$dir/$2" --jsonl "$dir/out.jsonl" --max-tokens "$max_tokens" $3 2>&1)
  printf '%-22s %s  %s\n' "$1" "$(grep -o 'prefill: [0-9]* prompt tokens computed' <<<"$out")" \
    "$(grep -o 'in [0-9.]* s' <<<"$out" | head -1)"
}
for ((r = 0; r < reps; ++r)); do
  run "n=$n (one prefill)" n.jsonl ""
  run "$n copies, n=1" copies.jsonl "--prefix-sharing off"  # each copy computes the prompt
  run "n=$n, --n-prefill each" n.jsonl "--n-prefill each"
done
