#!/usr/bin/env bash
# Scaling study on one host: glacier_mpi over ranks x replicas, --ubatch, --wire and --inject-latency-ms
# for a prefill-heavy and a decode-heavy workload, interleaved over REPS repetitions. Writes the raw runs,
# the one-rank runs' micro-batch timings (the pipeline model's calibration) and the workloads' token counts
# to results/*.csv, then predicts every run with pipeline_model.py and draws the plots (plot_sweep.py).
# A run that fails, or that other work disturbed, is reported, repeated up to MAX_TRIES times and then kept
# flagged; the sweep carries on, and the model and plots use what was measured cleanly and list the rest.
# Usage: benchmarks/scaling/sweep.sh [BUILD_DIR] [MODEL.gguf]   (QUICK=1: one rep of a few configurations,
# smaller workloads and shorter waits: a few minutes on a 2-core machine; RESULTS=DIR to write elsewhere)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-build}" && pwd)
MODEL=${2:-}
PY=${PY:-/usr/bin/python3}          # the system python has numpy, h5py and matplotlib (machine-notes.md)
REPS=${REPS:-3}                     # the machine is shared and noisy: medians of REPS interleaved runs
QUICK=${QUICK:-0}
# QUICK=1 checks the sweep end to end, not the model: fewer prompts, and a busy machine is waited for
# briefly and retried once (its runs are then flagged, not waited out).
if [ "$QUICK" = 1 ]; then QUICK_WAIT_S=15 QUICK_TRIES=2; else QUICK_WAIT_S=300 QUICK_TRIES=4; fi
RESULTS=${RESULTS:-$HERE/results}
SLOTS=32                            # glacier_mpi's default cap, given explicitly so every run has the same
BASE_UBATCH=128                     # the pipeline benchmark's micro-batch; the ubatch sweep varies it
PREFILL_PROMPTS=64                  # 30-70 words each (about 4000 tokens), 1 new token: prefill-heavy
DECODE_PROMPTS=32                   # 8 words each (about 11 tokens), DECODE_TOKENS new: decode-heavy
DECODE_TOKENS=64
if [ "$QUICK" = 1 ]; then PREFILL_PROMPTS=16 DECODE_PROMPTS=16 DECODE_TOKENS=32; fi
RAMP_STEP=4                         # calibration: prompt i generates RAMP_STEP (i + 1) tokens (below)
RUN_LIMIT_S=300                     # one job; the slowest configuration takes about 15 s here
NICE=5                              # the machine is shared with other work
QUIET_CORES=${QUIET_CORES:-0.5}     # a run starts once other work has used less CPU than this (cores) ...
QUIET_SECONDS=${QUIET_SECONDS:-3}   # ... for this many seconds in a row (a neighbour's gap between its runs is shorter) ...
QUIET_WAIT_S=${QUIET_WAIT_S:-$QUICK_WAIT_S}  # ... or after waiting this long; each run records what others used
MAX_OTHER_CORES=${MAX_OTHER_CORES:-0.25}  # a run during which others used more is repeated (and flagged) ...
MAX_TRIES=${MAX_TRIES:-$QUICK_TRIES}      # ... up to this many times (a failed run too)
CLK_TCK=$(getconf CLK_TCK)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1
MPIRUN=(mpirun --oversubscribe --bind-to none)

for tool in glacier_mpi glacier_mkmodel; do
  [ -x "$BUILD/$tool" ] || { echo "sweep: expected $BUILD/$tool (build it first), found nothing" >&2; exit 2; }
done
"$BUILD/glacier_mpi" --help | grep -q -- --inject-latency-ms ||
  { echo "sweep: $BUILD/glacier_mpi has no --inject-latency-ms option; rebuild it" >&2; exit 2; }
"$PY" -c 'import numpy, h5py, matplotlib' 2> /dev/null ||
  { echo "sweep: $PY lacks numpy, h5py or matplotlib (set PY to a python that has them)" >&2; exit 2; }
mkdir -p "$RESULTS"
# A copy of the program: the build directory is shared, and a rebuild during the sweep would mix versions.
cp "$BUILD/glacier_mpi" "$WORK/glacier_mpi"
GLACIER=$WORK/glacier_mpi

# The model's shape is also the pipeline model's input (pipeline_model.py --shape), so it is one string.
DEFAULT_SHAPE="n_embd=512 n_layer=8 n_head=8 n_head_kv=4 n_ff=1536 n_vocab=8192 type=q8_0"
SHAPE=${SHAPE:-$DEFAULT_SHAPE}
if [ -z "$MODEL" ]; then
  # The synthetic Q8_0 llama of benchmarks/pipeline (35 MB): compute, not start-up, dominates a job.
  MODEL=$WORK/bench.gguf
  "$BUILD/glacier_mkmodel" --preset tiny --n-embd 512 --n-layer 8 --n-head 8 --n-head-kv 4 --n-ff 1536 \
    --n-vocab 8192 --type q8_0 --seed 7 --out "$MODEL" > /dev/null
elif [ "$SHAPE" = "$DEFAULT_SHAPE" ]; then
  echo "sweep: with a model of your own, give its shape in SHAPE (as pipeline_model.py --shape takes it); found the default" >&2
  exit 2
fi

"$PY" - "$WORK" "$PREFILL_PROMPTS" "$DECODE_PROMPTS" "$RAMP_STEP" <<'PY'
import json, sys
words = ("the little cat sat on a warm mat and looked at the bright sun while the dog ran after a red ball "
         "in the green park near the old tall tree where birds sang every morning").split()
work, n_prefill, n_decode, ramp_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with open(work + "/prefill.jsonl", "w") as f:
    for i in range(n_prefill):
        n = 30 + (i * 7) % 40
        f.write(json.dumps({"id": "p%d" % i, "prompt": " ".join(words[(i + k) % len(words)] for k in range(n))}) + "\n")
with open(work + "/decode.jsonl", "w") as f:
    for i in range(n_decode):
        start = (i * 3) % (len(words) - 8)
        f.write(json.dumps({"id": "d%d" % i, "prompt": " ".join(words[start:start + 8])}) + "\n")
# The decode prompts with lengths that grow by ramp_step: on one rank in one micro-batch group, the group
# shrinks by a sequence every ramp_step steps, so one run times decode micro-batches of every size from
# n_decode rows down to 1 (the kernels' cost is not smooth in the row count: 4-row tiles, a 1-2 row path).
with open(work + "/ramp.jsonl", "w") as f:
    for i in range(n_decode):
        start = (i * 3) % (len(words) - 8)
        f.write(json.dumps({"id": "r%d" % i, "prompt": " ".join(words[start:start + 8]),
                            "max_tokens": ramp_step * (i + 1)}) + "\n")
PY

# Configurations, one a line: kind workload np replicas ubatch wire latency_ms slots.
# kind: calib = one-rank runs only the model's calibration needs (small decode groups, other ubatches;
# every one-rank run calibrates);
# layout = np x replicas at the base settings; ubatch, wire, latency = one factor changed from the base.
configs() {
  local layouts="1:1 2:1 2:2 4:1 4:2 4:4"   # np:replicas; stages = np / replicas
  local piped="2:1 4:1 4:2"                # layouts with more than one stage (hops to time)
  local w l u
  if [ "$QUICK" = 1 ]; then
    echo "calib ramp 1 1 512 f32 0 $SLOTS"
    for w in prefill decode; do
      for l in 1:1 2:1 4:1; do echo "layout $w ${l%:*} ${l#*:} $BASE_UBATCH f32 0 $SLOTS"; done
    done
    echo "latency decode 4 1 $BASE_UBATCH f32 1 $SLOTS"
    return
  fi
  for u in 32 512; do echo "calib prefill 1 1 $u f32 0 $SLOTS"; done
  # One decode group (every prompt fits one micro-batch of 512) shrinking from 32 sequences to 1.
  echo "calib ramp 1 1 512 f32 0 $SLOTS"
  for w in prefill decode; do
    for l in $layouts; do echo "layout $w ${l%:*} ${l#*:} $BASE_UBATCH f32 0 $SLOTS"; done
    for l in $layouts; do
      for u in 32 512; do
        [ "$w" = prefill ] && [ "$l" = 1:1 ] && continue  # already a calibration run
        echo "ubatch $w ${l%:*} ${l#*:} $u f32 0 $SLOTS"
      done
    done
    for l in $piped; do echo "wire $w ${l%:*} ${l#*:} $BASE_UBATCH int8 0 $SLOTS"; done
    for l in $piped; do
      for lat in 1 5; do echo "latency $w ${l%:*} ${l#*:} $BASE_UBATCH f32 $lat $SLOTS"; done
    done
  done
}

mapfile -t CONFIGS < <(configs)
[ "$QUICK" = 1 ] && REPS=1

# CPU time spent by processes that compete with the job, in clock ticks: /proc/stat's user, system, irq,
# softirq and steal, not its nice column. The job runs niced, so its user time is in that column (its
# system time is subtracted below); other niced work (fuzzers at nice 19) only takes what the job leaves.
busy_ticks() {
  awk '/^cpu / {print $2 + $4 + $7 + $8 + $9}' /proc/stat
}
# Waits until other work leaves the machine mostly idle (the ranks share 2 cores: a busy neighbour halves
# a pipeline's speed and no model of this job can know it); prints the seconds waited.
wait_quiet() {
  local waited=0 quiet=0 before after
  while [ $quiet -lt "$QUIET_SECONDS" ] && [ $waited -lt "$QUIET_WAIT_S" ]; do
    before=$(busy_ticks); sleep 1; after=$(busy_ticks)
    waited=$((waited + 1))
    if awk -v d=$((after - before)) -v hz="$CLK_TCK" -v q="$QUIET_CORES" 'BEGIN {exit !(d / hz < q)}'; then
      quiet=$((quiet + 1))
    else
      quiet=0
    fi
  done
  echo $((waited - quiet))
}

# One job; prints "seconds prompt_tok_per_s generated_tok_per_s micro_batches layer_split other_cores", or
# says on stderr why the job failed (the last lines of its log) and returns 1.
# other_cores: the CPU competing processes used during the job (busy_ticks minus the job's own system
# time, which /usr/bin/time reports for mpirun and the ranks it waits for), in cores.
run_job() {  # workload np replicas ubatch wire latency slots h5
  local workload=$1 np=$2 replicas=$3 ubatch=$4 wire=$5 latency=$6 slots=$7 h5=$8 log=${8%.h5}.log
  local max=1 prompts=$WORK/prefill.jsonl
  if [ "$workload" = decode ]; then max=$DECODE_TOKENS; prompts=$WORK/decode.jsonl; fi
  if [ "$workload" = ramp ]; then max=$((RAMP_STEP * DECODE_PROMPTS)); prompts=$WORK/ramp.jsonl; fi  # per-prompt max_tokens
  local busy0 busy1 t0 t1
  busy0=$(busy_ticks); t0=$(date +%s.%N)
  if ! timeout -k 10 $RUN_LIMIT_S nice -n $NICE /usr/bin/time -f '%U %S' -o "$WORK/time.txt" \
      "${MPIRUN[@]}" -np "$np" "$GLACIER" --model "$MODEL" \
      --prompts "$prompts" --out "$h5" --max-tokens "$max" --threads 1 --bind none --slots "$slots" \
      --ubatch "$ubatch" --wire "$wire" --inject-latency-ms "$latency" --replicas "$replicas" > "$log" 2>&1; then
    echo "sweep: job failed ($workload np $np replicas $replicas ubatch $ubatch wire $wire latency $latency ms; limit $RUN_LIMIT_S s); its last lines:" >&2
    tail -n 5 "$log" >&2
    return 1
  fi
  local line split
  line=$(sed -n 's/^done: .* (\([0-9]*\) failed), .* in \([0-9.]*\) s: \([0-9.]*\) prompt tok\/s, \([0-9.]*\) generated tok\/s, \([0-9]*\) micro-batches$/\1 \2 \3 \4 \5/p' "$log")
  split=$(sed -n 's/.*layer split \([0-9:,]*\) .*/\1/p' "$log" | head -1)
  [ -n "$split" ] || split=0:$(sed -n 's/.*layers 0:\([0-9]*\) .*/\1/p' "$log" | head -1)  # one stage logs no split
  read -r failed seconds prompt_rate gen_rate mbs <<< "$line"
  if [ -z "${mbs:-}" ] || [ "$failed" != 0 ]; then
    echo "sweep: expected a 'done:' line with 0 failed prompts from the job ($workload np $np replicas $replicas), found:" >&2
    grep -E '^done:|error' "$log" >&2 || tail -n 5 "$log" >&2
    return 1
  fi
  busy1=$(busy_ticks); t1=$(date +%s.%N)
  local other
  other=$(awk -v d=$((busy1 - busy0)) -v hz="$CLK_TCK" -v t0="$t0" -v t1="$t1" '{printf "%.2f", (d / hz - $2) / (t1 - t0)}' "$WORK/time.txt")
  echo "$seconds $prompt_rate $gen_rate $mbs $split $other"
}

CSV=$RESULTS/sweep.csv
CALIB=$RESULTS/calibration.csv
WORKLOADS=$RESULTS/workloads.csv
# status: ok, unclean (others used more than MAX_OTHER_CORES: clean 0) or failed (no measurement: clean 0).
echo "run,rep,kind,workload,np,replicas,stages,ubatch,wire,latency_ms,slots,layer_split,seconds,prompt_tok_per_s,generated_tok_per_s,tok_per_s,micro_batches,other_cores,waited_s,clean,status" > "$CSV"
echo "run,microbatch,tokens,compute_s" > "$CALIB"
rm -f "$RESULTS"/gantt_*.h5  # an earlier sweep's: this one's Gantt runs may fail
echo "$(basename "$MODEL") ($(du -h "$MODEL" | cut -f1)); ${#CONFIGS[@]} configurations x $REPS reps, 1 thread a rank, nice $NICE;" \
  "glacier_mpi built $(date -r "$BUILD/glacier_mpi" '+%F %T') at $(git -C "$HERE" rev-parse --short HEAD 2> /dev/null || echo '?')"
# Warm-up: page cache and first touch, so the first measured run is not the slowest.
run_job prefill 1 1 $BASE_UBATCH f32 0 $SLOTS "$WORK/warm.h5" > /dev/null ||
  echo "sweep: the warm-up run failed (above); carrying on" >&2

run=0
UNMEASURED=()  # configurations whose last try failed or was disturbed
for rep in $(seq "$REPS"); do
  # Odd repetitions run the list backwards, so drifting load on the machine does not always hit the same
  # configurations first.
  order=$(seq 0 $((${#CONFIGS[@]} - 1)))
  [ $((rep % 2)) = 0 ] && order=$(tac <<< "$order")
  for i in $order; do
    read -r kind workload np replicas ubatch wire latency slots <<< "${CONFIGS[$i]}"
    for try in $(seq "$MAX_TRIES"); do
      run=$((run + 1))
      h5=$WORK/run$run.h5
      waited=$(wait_quiet)
      describe="$kind $workload np $np = $replicas x $((np / replicas)) ubatch $ubatch $wire $latency ms slots $slots"
      if measured=$(run_job "$workload" "$np" "$replicas" "$ubatch" "$wire" "$latency" "$slots" "$h5"); then
        read -r seconds prate grate mbs split other <<< "$measured"
        rate=$prate; [ "$workload" = prefill ] || rate=$grate
        clean=$(awk -v o="$other" -v m="$MAX_OTHER_CORES" 'BEGIN {print (o <= m) ? 1 : 0}')
        status=ok; [ "$clean" = 1 ] || status=unclean
        printf '%4d rep %d %-8s %-8s np %d = %d x %d ubatch %4d %-4s %s ms slots %2d: %8.1f tok/s (others used %s cores; waited %s s)\n' \
          "$run" "$rep" "$kind" "$workload" "$np" "$replicas" "$((np / replicas))" "$ubatch" "$wire" "$latency" "$slots" "$rate" \
          "$other" "$waited"
      else
        seconds='' prate='' grate='' rate='' mbs='' split='' other='' clean=0 status=failed
        rm -f "$h5"
      fi
      echo "$run,$rep,$kind,$workload,$np,$replicas,$((np / replicas)),$ubatch,$wire,$latency,$slots,\"$split\",$seconds,$prate,$grate,$rate,$mbs,$other,$waited,$clean,$status" >> "$CSV"
      [ "$clean" = 1 ] && break
      if [ "$status" = unclean ]; then
        why="judged unclean: others used $other cores during it (more than MAX_OTHER_CORES=$MAX_OTHER_CORES)"
      else
        why="failed (above)"
      fi
      if [ "$try" -lt "$MAX_TRIES" ]; then
        echo "sweep: run $run ($describe) $why; repeating it (try $((try + 1)) of $MAX_TRIES)" >&2
        rm -f "$h5"
      else
        echo "sweep: run $run ($describe) $why, the last of $MAX_TRIES tries: kept flagged $status, left out of the model; carrying on" >&2
        UNMEASURED+=("$describe ($status)")
      fi
    done
    # Any finished run gives its workload's token counts (the same for every layout).
    if [ -f "$h5" ] && [ ! -s "$WORKLOADS.$workload" ]; then
      "$PY" "$HERE/trace_tools.py" workload "$h5" "$workload" > "$WORKLOADS.$workload"
    fi
    if [ "$np" = 1 ]; then
      # A disturbed one-rank run must not calibrate the model.
      if [ "$clean" = 1 ]; then "$PY" "$HERE/trace_tools.py" microbatches "$h5" "$run" >> "$CALIB"; fi
    fi
    # The Gantt charts' runs: four stages at the base settings (and 1 ms a hop for decode).
    if [ "$np/$replicas/$ubatch/$wire" = 4/1/$BASE_UBATCH/f32 ] && { [ "$workload/$latency" = prefill/0 ] || [ "$workload/$latency" = decode/1 ]; }; then
      [ ! -f "$h5" ] || cp "$h5" "$RESULTS/gantt_$workload.h5"
    fi
    rm -f "$h5"
  done
done
{ echo "workload,index,prompt_tokens,generated"; cat "$WORKLOADS".* 2> /dev/null || true; } > "$WORKLOADS"
rm -f "$WORKLOADS".*
echo "raw runs: $CSV; calibration: $CALIB; workloads: $WORKLOADS"
if [ ${#UNMEASURED[@]} -gt 0 ]; then
  echo "sweep: ${#UNMEASURED[@]} configuration run(s) without a clean measurement (the model and plots leave them out or mark them):" >&2
  printf '  %s\n' "${UNMEASURED[@]}" >&2
fi

"$PY" "$HERE/pipeline_model.py" predict --sweep "$CSV" --calibration "$CALIB" --workloads "$WORKLOADS" \
  --shape "$SHAPE" --out "$RESULTS/predicted.csv" | tee "$RESULTS/predicted.md"
"$PY" "$HERE/plot_sweep.py" --sweep "$CSV" --predicted "$RESULTS/predicted.csv" --results "$RESULTS"
