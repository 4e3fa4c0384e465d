# Set-up the pipeline benchmarks share, sourced once BUILD is read: a scratch folder removed on exit,
# mpirun on one host (root allowed, ranks yielding while idle), the synthetic llama and the median.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
MPIRUN="mpirun --oversubscribe --bind-to none"

# synthetic_llama FILE: the benchmarks' default model, a synthetic llama big enough that compute, not
# start-up, dominates (35 MB Q8_0, about 40M parameters: n_embd 512, 8 layers, vocab 8192).
synthetic_llama() {
  "$BUILD/glacier_mkmodel" --preset tiny --n-embd 512 --n-layer 8 --n-head 8 --n-head-kv 4 --n-ff 1536 \
    --n-vocab 8192 --type q8_0 --seed 7 --out "$1" > /dev/null
}

# median: of the numbers on stdin, split by spaces or lines.
median() { tr ' ' '\n' | sort -g | awk 'NF {a[++n]=$1} END {print (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2}'; }
