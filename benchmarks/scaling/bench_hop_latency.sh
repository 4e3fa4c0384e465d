#!/usr/bin/env bash
# Decode throughput of a 4-stage pipeline across 4 network-namespace hosts with an injected delay per hop
# (glacier_mpi --inject-latency-ms) against none, for few and for many sequences in flight (--slots).
# Usage (root): benchmarks/scaling/bench_hop_latency.sh [BUILD_DIR] [MODEL.gguf]  (table to stdout, CSV too)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-build}" && pwd)
MODEL=${2:-}
LATENCIES_MS=${LATENCIES_MS:-"0 1"}
# slots:decode-groups. 4:0 = one sequence a stage (latency exposed); 32:0 = the default cap, a decode group
# a stage; 64:0 = more sequences a group; 64:8 = two groups a stage, so one computes while the other
# crosses the links; 64:auto = --decode-groups auto (the default); the CSV's chosen_groups is its
# start-up choice, or "start>kept" when its measured trials kept another. Each run's CSV row also has
# the 1-minute load average before it (a shared machine).
CONFIGS=${CONFIGS:-"4:0 32:0 64:0 64:8"}
PROMPTS=${PROMPTS:-64}
MAX_TOKENS=${MAX_TOKENS:-64}
REPS=${REPS:-3}                    # the machine is shared and noisy: the median of REPS runs is reported
HOSTS=${HOSTS:-4}
LAUNCH=${LAUNCH:-netns}            # netns: one rank a namespace host over TCP; local: plain mpirun (shared memory)
CSV=${CSV:-$HERE/last_run.csv}
RUN_LIMIT_S=600                    # one job; far above the slowest configuration measured (about 40 s)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1

"$BUILD/glacier_mpi" --help | grep -q -- --inject-latency-ms ||
  { echo "bench_hop_latency: $BUILD/glacier_mpi has no --inject-latency-ms option; rebuild it" >&2; exit 2; }
if [ -z "$MODEL" ]; then
  # The synthetic Q8_0 llama of benchmarks/pipeline (35 MB, 8 layers): per-token compute of the order of
  # a millisecond, so a 1 ms hop is neither negligible nor everything.
  MODEL=$WORK/bench.gguf
  "$BUILD/glacier_mkmodel" --preset tiny --n-embd 512 --n-layer 8 --n-head 8 --n-head-kv 4 --n-ff 1536 \
    --n-vocab 8192 --type q8_0 --seed 7 --out "$MODEL" > /dev/null
fi
# Short prompts (8 words), so the job is almost all decode.
/usr/bin/python3 - "$WORK/prompts.jsonl" "$PROMPTS" <<'PY'
import json, sys
words = ("the little cat sat on a warm mat and looked at the bright sun while the dog ran after a red ball "
         "in the green park near the old tall tree where birds sang every morning").split()
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        start = (i * 3) % (len(words) - 8)
        f.write(json.dumps({"id": "d%d" % i, "prompt": " ".join(words[start:start + 8])}) + "\n")
PY

run_job() {  # latency_ms slots decode_groups -> "generated_tok_per_s seconds chosen_groups"
  local latency=$1 slots=$2 groups=$3 log=$WORK/run.log
  local job=("$BUILD/glacier_mpi" --model "$MODEL" --prompts "$WORK/prompts.jsonl" --jsonl "$WORK/out.jsonl"
             --max-tokens "$MAX_TOKENS" --threads 1 --bind none --slots "$slots" --decode-groups "$groups"
             --inject-latency-ms "$latency")
  if [ "$LAUNCH" = netns ]; then
    NETNS_HOSTS=$HOSTS timeout -k 10 $RUN_LIMIT_S "$HERE/../../tests/system/netns_hosts.sh" run -np "$HOSTS" "${job[@]}" > "$log" 2>&1
  else
    timeout -k 10 $RUN_LIMIT_S mpirun --oversubscribe --bind-to none -np "$HOSTS" "${job[@]}" > "$log" 2>&1
  fi || { echo "bench_hop_latency: job failed (latency $latency ms, slots $slots, decode groups $groups):" >&2; cat "$log" >&2; exit 1; }
  local chosen measured
  chosen=$(sed -n 's/^rank 0: \([0-9]*\) decode groups (.*/\1/p' "$log" | head -1)
  # auto's first measured change, if its trials kept another count: "start>kept".
  measured=$(sed -n 's/^rank 0: decode groups re-tuned by measurement at [0-9]* live sequences: [0-9]* -> \([0-9]*\) .*/\1/p' "$log" | head -1)
  [ -n "$measured" ] && chosen="$chosen>$measured"
  echo "$(sed -n 's/^done: .* generated tokens in \([0-9.]*\) s: .* \([0-9.]*\) generated tok\/s.*/\2 \1/p' "$log") ${chosen:--}"
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "model $(basename "$MODEL") ($(du -h "$MODEL" | cut -f1)); $HOSTS ranks ($LAUNCH), 1 thread each; $PROMPTS prompts x $MAX_TOKENS new tokens; median of $REPS"
echo "slots,decode_groups,latency_ms,rep,generated_tok_per_s,seconds,chosen_groups,load1" > "$CSV"
run_job 0 32 0 > /dev/null  # warm-up: page cache, first touch
declare -A rates chosen_by
for rep in $(seq "$REPS"); do
  for config in $CONFIGS; do
    for latency in $LATENCIES_MS; do  # interleaved, so drifting load on the machine hits every configuration
      load=$(cut -d' ' -f1 /proc/loadavg)
      read -r rate seconds chosen <<< "$(run_job "$latency" "${config%:*}" "${config#*:}")"
      echo "${config%:*},${config#*:},$latency,$rep,$rate,$seconds,$chosen,$load" >> "$CSV"
      [ "${config#*:}" = auto ] && chosen_by[$config,$latency]+="$chosen "
      rates[$config,$latency]+="$rate "
    done
  done
done
printf '%6s %13s %11s %18s %15s
' slots "decode groups" "latency ms" "generated tok/s" "ratio to 0 ms"
for config in $CONFIGS; do
  base=$(tr ' ' '\n' <<< "${rates[$config,0]:-}" | grep . | median)
  for latency in $LATENCIES_MS; do
    rate=$(tr ' ' '\n' <<< "${rates[$config,$latency]}" | grep . | median)
    groups=${config#*:}; [ "$groups" = 0 ] && groups="$HOSTS (one a stage)"
    [ "$groups" = auto ] && groups="auto: $(tr ' ' '\n' <<< "${chosen_by[$config,$latency]}" | grep . | sort -n | uniq -c | awk '{printf "%s%sx%s", (NR > 1 ? "," : ""), $2, $1}')"
    printf '%6s %13s %11s %18.1f %15s\n' "${config%:*}" "$groups" "$latency" "$rate" \
      "$(awk -v a="$rate" -v b="$base" 'BEGIN{if (b > 0) printf "%.3f", a / b; else print "-"}')"
  done
done
echo "raw figures: $CSV"
