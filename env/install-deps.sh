#!/usr/bin/env bash
# Installs every Debian package glacier-mpi needs to build, test, benchmark and plot.
# Idempotent and quiet when everything is already present.
set -euo pipefail
PACKAGES=(
  build-essential cmake pkg-config
  openmpi-bin libopenmpi-dev
  libopenblas-dev
  libhwloc-dev hwloc
  libhdf5-openmpi-dev hdf5-tools
  libboost-program-options-dev
  libbenchmark-dev libgtest-dev
  nlohmann-json3-dev libpcre2-dev libssl-dev
  python3-numpy python3-h5py-mpi python3-matplotlib python3-scipy
  python3-h5py python3-pandas  # src/python/glacier_results.py
  clang libclang-rt-14-dev
  slurm-wlm munge iproute2
  # Slurm's mpi/pmix plugin (srun --mpi=pmix in jobs/) loads the unversioned libpmix.so, which only this
  # package ships; libopenmpi-dev pulls it in today, but the jobs should not depend on that.
  libpmix-dev
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
