#!/usr/bin/env bash
# Expert parallelism against pipeline stages on one host: the same MoE model on NP ranks split as NP stages
# and as NP/E stages x --expert-parallel E, one sequence (decode) and 32 sequences, alternating REPS times.
# Prints each run's generated tok/s, ranks' peak RSS and (expert-parallel runs) the micro-batches each
# group split by sequence, then the medians; checks both layouts write the same JSONL bytes (NP, E, REPS,
# THREADS, CTX). LINK_GBIT=G (root, iproute2): the ranks run on NP network-namespace hosts
# (tests/system/netns_hosts.sh) whose links are shaped to G Gbit/s, a rank a host.
# Usage: benchmarks/pipeline/bench_expert_parallel.sh [BUILD_DIR] [MOE_MODEL.gguf]
set -euo pipefail
BUILD=${1:-build}
MODEL=${2:-}
NP=${NP:-2}
E=${E:-2}
REPS=${REPS:-3}
THREADS=${THREADS:-1}
LINK_GBIT=${LINK_GBIT:-}
CTX=${CTX:-}  # --ctx for both layouts (the expert-parallel members hold the stage's whole KV cache)
source "$(dirname "$0")/bench_common.sh"
if [ -n "$LINK_GBIT" ]; then
  HOSTS=$(cd "$(dirname "$0")/../../tests/system" && pwd)/netns_hosts.sh
  SET=benchep$$
  NETNS_HOSTS=$NP "$HOSTS" up "$SET" > /dev/null
  trap '"$HOSTS" down "$SET" > /dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
  for h in $(seq 0 $((NP - 1))); do  # a token bucket on each host's link, both ways through the bridge
    "$HOSTS" exec "$SET" "h$h" tc qdisc add dev eth0 root tbf rate "${LINK_GBIT}gbit" burst 64kb latency 50ms
  done
  MPIRUN="$HOSTS exec $SET h0 mpirun $("$HOSTS" mpirun-flags "$SET") -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"
fi
if [ -z "$MODEL" ]; then
  # The RESULTS model: DeepSeek-2-shaped, 16 layers of 16 experts (4 used a token), 1.19 GB in bf16.
  MODEL=$WORK/moe.gguf
  "$BUILD/glacier_mkmodel" --arch deepseek2 --n-embd 1024 --n-layer 16 --n-expert 16 --n-expert-used 4 \
    --n-ff-expert 704 --n-vocab 32000 --type bf16 --out "$MODEL" > /dev/null
fi
echo "Once upon a time, there was a little girl named Lily." > "$WORK/one.txt"
for i in $(seq 1 32); do echo "Story $i: the little cat sat on a warm mat and looked at the sun."; done > "$WORK/many.txt"
run() {  # layout prompts max_tokens -> "tok/s rss0/rss1... [split a/b...]"
  local layout=$1 prompts=$2 max=$3 extra=""
  [ "$layout" = ep ] && extra="--expert-parallel $E"
  [ -n "$CTX" ] && extra+=" --ctx $CTX"
  [ -n "$LINK_GBIT" ] && extra+=" --bind none"  # the hosts share this machine's cores
  $MPIRUN -np "$NP" "$BUILD/glacier_mpi" --model "$MODEL" --prompts "$WORK/$prompts" --max-tokens "$max" \
    --threads "$THREADS" --jsonl "$WORK/$layout-$prompts.jsonl" $extra > "$WORK/log" 2>&1
  local rate rss split
  rate=$(sed -nE 's/.* ([0-9.]+) generated tok\/s.*/\1/p' "$WORK/log" | tail -1)
  rss=$(sed -nE 's/^rank ([0-9]+): peak RSS ([0-9.]+) MiB/\1 \2/p' "$WORK/log" | sort -n | cut -d' ' -f2 | paste -sd/)
  # Micro-batches each expert group split by sequence (its leader's log line), stage by stage.
  split=$(sed -nE "s/.*stage ([0-9]+)'s expert group split ([0-9]+) of.*/\1 \2/p" "$WORK/log" | sort -n | cut -d' ' -f2 | paste -sd/)
  [ -n "$rate" ] || { echo "bench_expert_parallel: no throughput in the $layout run:" >&2; cat "$WORK/log" >&2; exit 1; }
  echo "$rate $rss${split:+ $split}"
}
declare -A rates
for rep in $(seq 1 "$REPS"); do
  for layout in pp ep; do
    for shape in "one.txt 128" "many.txt 64"; do
      set -- $shape
      read -r rate rss split <<< "$(run "$layout" "$1" "$2")"
      echo "round $rep, $layout, $1: $rate tok/s, peak RSS by rank $rss MiB${split:+, micro-batches split by sequence (stage by stage): $split}"
      rates[$layout-$1]+="$rate "
    done
  done
done
for shape in one.txt many.txt; do
  cmp -s "$WORK/pp-$shape.jsonl" "$WORK/ep-$shape.jsonl" || { echo "bench_expert_parallel: layouts differ on $shape" >&2; exit 1; }
done
echo "medians of $REPS, generated tok/s, $NP ranks of $THREADS threads${LINK_GBIT:+ on hosts linked at $LINK_GBIT Gbit/s} (same JSONL bytes in both layouts):"
for shape in one.txt many.txt; do
  pp=$(echo "${rates[pp-$shape]}" | median); ep=$(echo "${rates[ep-$shape]}" | median)
  echo "  $shape: $NP stages $pp, $((NP / E)) stages x --expert-parallel $E $ep, ratio $(awk -v a="$ep" -v b="$pp" 'BEGIN {printf "%.2f", a / b}')"
done
