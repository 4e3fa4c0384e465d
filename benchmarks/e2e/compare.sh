#!/usr/bin/env bash
# Side by side on one GGUF file and thread count: build/bench_e2e, and, when given by path, a peer's
# llama-bench and llama-batched-bench (never fetched or built here), run alternately REPS times so that
# drifting load on a shared machine hits both; prints the medians, the ratios and glacier's figures as
# fractions of the ceilings bench_e2e measures in the same run. Several models (e.g. Q8_0, Q4_K_M and F16
# files of one model) are compared one after the other in one call.
# Usage: [LLAMA_BENCH=/path/llama-bench] [LLAMA_BATCHED_BENCH=/path/llama-batched-bench] \
#        benchmarks/e2e/compare.sh BUILD_DIR MODEL.gguf [MODEL2.gguf ...] [THREADS]
set -euo pipefail
usage="usage: compare.sh BUILD_DIR MODEL.gguf [MODEL2.gguf ...] [THREADS]"
BUILD=$(cd "${1:?$usage}" && pwd)
shift
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
THREADS=2
if [ $# -ge 2 ] && [[ "${!#}" =~ ^[0-9]+$ ]]; then THREADS=${!#}; set -- "${@:1:$#-1}"; fi
if [ $# -gt 1 ]; then
  for model in "$@"; do "$0" "$BUILD" "$model" "$THREADS"; echo; done
  exit 0
fi
MODEL=$1
REPS=${REPS:-3}
NPL=${NPL:-1,8,32}        # batched decode: parallel sequences
NPP=${NPP:-128}           # batched decode: prompt tokens per sequence
NTG=${NTG:-64}            # batched decode: new tokens per sequence
OUT=${OUT:-$(mktemp -d)}
[ -r "$MODEL" ] || { echo "compare.sh: cannot read model $MODEL" >&2; exit 2; }
[ -x "$BUILD/bench_e2e" ] || { echo "compare.sh: expected $BUILD/bench_e2e; build the benchmarks" >&2; exit 2; }
mkdir -p "$OUT"
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# The median of a space-separated list ("nan" when it is empty: a peer that was not given).
median_of() { tr ' ' '\n' <<< "$1" | { grep . || true; } | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0 && a == a) printf "%.2f", a / b; else print "-"}'; }
json_field() { /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"d": d}))' "$@"; }

declare -A ours theirs
for rep in $(seq "$REPS"); do
  "$BUILD/bench_e2e" --model "$MODEL" --threads "$THREADS" --pp 128,512 --tg 128 --npl "$NPL" --npp "$NPP" --ntg "$NTG" \
    --reps 1 --json "$OUT/ours.$rep.json" > "$OUT/ours.$rep.txt"
  for k in pp128 pp512 tg128; do ours[$k]+="$(json_field "$OUT/ours.$rep.json" "d['$k']") "; done
  ours[bw]+="$(json_field "$OUT/ours.$rep.json" "d['read_bandwidth']") "
  for k in pp128 pp512; do
    ours[f$k]+="$(json_field "$OUT/ours.$rep.json" "d['$k'] * d['ops_per_token'] / (d['int8_peak'] if d['prefill_ceiling'] == 'int8' else d['f32_peak'])") "
    # Q8_0 on a tier without VNNI: also the fraction of the sign trick's own ceiling (0 where it is the same).
    ours[g$k]+="$(json_field "$OUT/ours.$rep.json" "d['$k'] * d['ops_per_token'] / d['signed_int8_peak'] if d.get('sign_trick') else 0") "
  done
  ours[ceiling]=$(json_field "$OUT/ours.$rep.json" "d['prefill_ceiling'] + ' (' + d['int8_instructions'] + ')' if d['prefill_ceiling'] == 'int8' else 'fp32 FMA'")
  ours[tier]=$(json_field "$OUT/ours.$rep.json" "d['kernels']")
  ours[wb]=$(json_field "$OUT/ours.$rep.json" "d['decode_bytes']")
  for n in ${NPL//,/ }; do
    ours[s$n]+="$(json_field "$OUT/ours.$rep.json" "[b['s_total'] for b in d['batched'] if b['npl'] == $n][0]") "
    ours[tg$n]+="$(json_field "$OUT/ours.$rep.json" "[b['s_tg'] for b in d['batched'] if b['npl'] == $n][0]") "
  done
  if [ -n "${LLAMA_BENCH:-}" ]; then
    "$LLAMA_BENCH" -m "$MODEL" -t "$THREADS" -p 128,512 -n 128 -r 1 -o json > "$OUT/llama-bench.$rep.json" 2> /dev/null
    for k in pp128 pp512 tg128; do
      n_prompt=0; n_gen=0
      case $k in pp*) n_prompt=${k#pp} ;; tg*) n_gen=${k#tg} ;; esac
      theirs[$k]+="$(json_field "$OUT/llama-bench.$rep.json" "[r['avg_ts'] for r in d if r['n_prompt'] == $n_prompt and r['n_gen'] == $n_gen][0]") "
    done
  fi
  if [ -n "${LLAMA_BATCHED_BENCH:-}" ]; then
    max_npl=$(tr ',' '\n' <<< "$NPL" | sort -g | tail -1)
    "$LLAMA_BATCHED_BENCH" -m "$MODEL" -t "$THREADS" -tb "$THREADS" -c $((max_npl * (NPP + NTG) + 64)) -b 2048 -ub 512 \
      -npp "$NPP" -ntg "$NTG" -npl "$NPL" > "$OUT/batched-bench.$rep.txt" 2> /dev/null
    # Table rows: | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |
    for n in ${NPL//,/ }; do
      row=$(awk -F'|' -v b="$n" '$4 + 0 == b && $2 + 0 > 0 {print}' "$OUT/batched-bench.$rep.txt" | tail -1)
      theirs[s$n]+="$(awk -F'|' '{print $11 + 0}' <<< "$row") "
      theirs[tg$n]+="$(awk -F'|' '{print $9 + 0}' <<< "$row") "
    done
  fi
done

bw=$(median_of "${ours[bw]}")
echo "model $(basename "$MODEL"), $THREADS threads, kernel tier ${ours[tier]}, median of $REPS alternating runs; raw outputs in $OUT"
printf '%-22s %12s %12s %8s\n' test glacier llama.cpp ratio
for k in pp128 pp512 tg128; do
  a=$(median_of "${ours[$k]}"); b=$(median_of "${theirs[$k]:-}")
  printf '%-22s %12.1f %12s %8s\n' "$k tok/s" "$a" "$b" "$(ratio "$a" "$b")"
done
for n in ${NPL//,/ }; do
  for m in s tg; do
    a=$(median_of "${ours[$m$n]}"); b=$(median_of "${theirs[$m$n]:-}")
    label="batched $n $([ $m = s ] && echo total || echo decode)"
    printf '%-22s %12.1f %12s %8s\n' "$label tok/s" "$a" "$b" "$(ratio "$a" "$b")"
  done
done
tg=$(median_of "${ours[tg128]}")
awk -v bw="$bw" -v wb="${ours[wb]}" -v tg="$tg" 'BEGIN {
  bound = bw / wb; printf "read bandwidth %.1f GB/s, %.0f MB of weights a token: decode bound %.1f tok/s, glacier tg128 at %.0f%% of it\n", bw / 1e9, wb / 1e6, bound, 100 * tg / bound }'
for k in pp128 pp512; do
  f=$(median_of "${ours[f$k]}")
  g=$(median_of "${ours[g$k]}")
  awk -v f="$f" -v g="$g" -v k="$k" -v c="${ours[ceiling]}" 'BEGIN {
    printf "glacier %s at %.0f%% of the %s ceiling measured in the same runs", k, 100 * f, c
    if (g > 0) printf " (%.0f%% of the sign trick'"'"'s ceiling, which Q8_0 needs on this tier)", 100 * g
    printf "\n" }'
done
