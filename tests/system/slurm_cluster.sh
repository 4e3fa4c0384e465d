#!/usr/bin/env bash
# A throw-away single-node Slurm cluster in one directory (munged, slurmctld, slurmd on free ports), for
# the system tests and for trying jobs/ by hand. Needs root, slurm-wlm and munge. See `slurm_cluster.sh help`.
set -euo pipefail

readonly REGISTRY=/run/glacier-slurm   # one file a running cluster: its directory and the PID that owns it
readonly READY_LIMIT_S=60              # each daemon is ready in ~2 s here; a loaded machine gets room
readonly STOP_GRACE_S=10               # SIGTERM first (daemons save state), SIGKILL after this
# Slurm holds a requeued job back for the credential lifetime (AuthInfo cred_expire, default 120 s) before
# it may start again; a test of requeue-and-resume should not idle that long. Step launches here take well
# under a second, so 10 s still leaves each credential ample time to be used.
readonly CRED_EXPIRE_S=10
readonly EXIT_SKIP=77
# slurmstepd listens on a Unix socket DIR/spool/HOST/HOST_JOB.STEP, whose path must fit sun_path (108 bytes
# with the NUL); the check leaves room for a 7-digit job id and the batch step's 10-digit id.
readonly SOCKET_PATH_MAX=107
# Every daemon and client is on this machine: they talk over loopback, whatever the host name resolves to
# (or whether it resolves at all).
readonly LOOPBACK=127.0.0.1
readonly OWNER_POLL_S=1                # how often the watcher looks whether the cluster's owner still runs

usage() {
  cat <<EOF
usage: $0 COMMAND
  check                  exit 0 if a cluster can be started here, else print why and exit $EXIT_SKIP
  start DIR [OWNER_PID]  start a cluster whose files all live in DIR (created); prints 'export SLURM_CONF=...'.
                         OWNER_PID (default: the caller) is the process it belongs to: when that process
                         is gone (even killed outright), a watcher stops the cluster within seconds.
  stop DIR               cancel its jobs, stop its daemons and any process left from its jobs
  logs DIR               print the daemons' logs
  clean-stale            stop clusters whose owner has gone and whose watcher did not stop them
                         (every start does this first)
Clients need SLURM_CONF=DIR/slurm.conf in their environment.
EOF
}

die() { echo "slurm_cluster: $*" >&2; exit 1; }

check() {
  local tool
  if [ "$(id -u)" -ne 0 ]; then echo "slurm_cluster: needs root (SlurmUser=root), running as uid $(id -u)"; return $EXIT_SKIP; fi
  for tool in munged mungekey slurmctld slurmd sbatch scontrol sinfo setpriv; do
    command -v "$tool" > /dev/null || { echo "slurm_cluster: '$tool' is not installed (env/install-deps.sh installs slurm-wlm and munge)"; return $EXIT_SKIP; }
  done
  id munge > /dev/null 2>&1 || { echo "slurm_cluster: no user 'munge' (install the munge package)"; return $EXIT_SKIP; }
}

# A TCP port nobody listens on now (a small race with other starters remains; they pick at random too).
free_port() {
  local port used
  used=$(ss -Htan 2> /dev/null | awk '{print $4}' | sed 's/.*://' | sort -u)
  for _ in $(seq 200); do
    port=$((20000 + RANDOM % 40000))
    grep -qx "$port" <<< "$used" || { echo "$port"; return; }
  done
  die "no free TCP port found"
}

wait_until() {  # seconds description command...
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" > /dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { echo "slurm_cluster: $what not ready after $limit s" >&2; return 1; }
    sleep 0.2
  done
}

print_logs() {
  local dir=$1 f
  for f in "$dir"/log/*.log "$dir"/munge/munged.log; do
    [ -f "$f" ] || continue
    echo "----- $f (last 60 lines)"
    tail -n 60 "$f"
  done
}

# A start that fails shows why and takes down what it had started.
start_failed() {
  print_logs "$1" >&2
  stop "$1"
  exit 1
}

start() {
  local dir=$1 owner=${2:-$PPID} host node_line ctld_port slurmd_port
  clean_stale
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ ! -e "$dir/pids" ] || die "start: $dir already has a cluster; stop it first"
  host=$(hostname)
  local longest_socket="$dir/spool/$host/${host}_1234567.4294967291"
  [ ${#longest_socket} -le $SOCKET_PATH_MAX ] ||
    die "start: expected a DIR path of at most $((SOCKET_PATH_MAX - ${#longest_socket} + ${#dir})) characters (job step sockets live under it), found ${#dir}: $dir"
  # A DIR used by an earlier (stopped) cluster: its saved state names that cluster, and slurmctld refuses to
  # start on another cluster's state ("CLUSTER NAME MISMATCH"); its logs would mix two clusters' lines.
  rm -rf "$dir"/{state,spool,log,tmp}
  mkdir -p "$dir"/{state,spool,log,munge,tmp} "$REGISTRY"
  echo "$dir $owner" > "$REGISTRY/$(echo "$dir" | tr / _)"
  : > "$dir/pids"
  # munged refuses a key or socket directory that others could write: its own, owned by munge. A DIR used
  # before keeps its old key: --force replaces it (a fresh key for every cluster).
  chown munge:munge "$dir/munge"
  chmod 0711 "$dir/munge"  # clients must reach the socket: execute for all, read and write for munge only
  setpriv --reuid=munge --regid=munge --init-groups mungekey --create --force --keyfile="$dir/munge/munge.key" > /dev/null
  setpriv --reuid=munge --regid=munge --init-groups munged --foreground --socket="$dir/munge/socket" \
    --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/seed" \
    --log-file="$dir/munge/munged.log" > "$dir/log/munged-stdout.log" 2>&1 &
  echo "munged $!" >> "$dir/pids"
  wait_until $READY_LIMIT_S munged test -S "$dir/munge/socket" || start_failed "$dir"

  # slurmd -C describes this machine (CPUs, sockets, cores, memory) as a node line.
  node_line=$(slurmd -C | head -n 1)
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  [ "$ctld_port" != "$slurmd_port" ] || slurmd_port=$((ctld_port + 1))
  cat > "$dir/slurm.conf" <<EOF
# Generated by tests/system/slurm_cluster.sh: one node, every file under $dir.
ClusterName=glacier$$
SlurmctldHost=$host($LOOPBACK)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket,cred_expire=$CRED_EXPIRE_S
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
# Job steps' scratch (the PMIx plugin's spmix_appdir_JOB.STEP): per cluster, so that two clusters' job 1
# do not share /tmp/spmix_appdir_1.0 and nothing is left in /tmp.
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
MailProg=/bin/true
# Quick turn-around for tests: the grace between SIGTERM and SIGKILL when a job is cancelled or times out.
KillWait=5
# A job that becomes eligible by time (a requeued job after cred_expire) waits for the next periodic
# scheduling pass (main 60 s, backfill 30 s by default); one job queue this small is cheap to scan each second.
SchedulerParameters=sched_interval=1,bf_interval=1
MinJobAge=600
$node_line NodeAddr=$LOOPBACK State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -D -i -f "$SLURM_CONF" > "$dir/log/slurmctld-stdout.log" 2>&1 &
  echo "slurmctld $!" >> "$dir/pids"
  wait_until $READY_LIMIT_S slurmctld scontrol ping || start_failed "$dir"
  mkdir -p "$dir/spool/$host"
  slurmd -D -f "$SLURM_CONF" > "$dir/log/slurmd-stdout.log" 2>&1 &
  echo "slurmd $!" >> "$dir/pids"
  node_idle() { [ "$(sinfo -h -n "$host" -o %t)" = idle ]; }
  wait_until $READY_LIMIT_S "slurmd (node $host idle)" node_idle || { sinfo -N -l >&2 || true; start_failed "$dir"; }
  # The owner may die without calling stop (a test killed by ctest's timeout): a watcher, detached from
  # every caller's files and working directory, stops the cluster once the owner is gone.
  (
    cd /
    while kill -0 "$owner" 2> /dev/null; do sleep $OWNER_POLL_S; done
    stop "$dir"
  ) < /dev/null > /dev/null 2>&1 &
  echo "$!" > "$dir/watcher.pid"
  echo "export SLURM_CONF=$SLURM_CONF"
}

# Every process (but this script and its callers) with its working directory or an open file under DIR:
# the job steps, their slurmstepd and anything a job left running there.
processes_using() {
  local dir=$1 pid keep=" $BASHPID " p=$BASHPID  # BASHPID: also right inside the watcher's subshell
  while [ "$p" -gt 1 ]; do keep+="$p "; p=$(awk '{print $4}' "/proc/$p/stat" 2> /dev/null || echo 1); done
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    [[ $keep == *" $pid "* ]] && continue
    if readlink "/proc/$pid/cwd" "/proc/$pid"/fd/* 2> /dev/null | grep -q "^$dir/"; then echo "$pid"; fi
  done
}

stop() {
  local dir=$1 name pid deadline
  [ -d "$dir" ] || return 0
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/watcher.pid" ]; then  # a stop by hand: the watcher is not needed any more
    read -r pid < "$dir/watcher.pid"
    [ "$pid" = "$BASHPID" ] || kill -TERM "$pid" 2> /dev/null || true
    rm -f "$dir/watcher.pid"
  fi
  if [ -f "$dir/slurm.conf" ] && [ -f "$dir/pids" ] && SLURM_CONF=$dir/slurm.conf timeout 10 scontrol ping > /dev/null 2>&1; then
    # Cancelled through Slurm first, so that slurmstepd ends the job steps it owns.
    SLURM_CONF=$dir/slurm.conf timeout 10 scancel --full --quiet --partition=debug 2> /dev/null || true
    deadline=$((SECONDS + STOP_GRACE_S))
    while [ -n "$(SLURM_CONF=$dir/slurm.conf timeout 10 squeue -h -t R,CG -o %i 2> /dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  fi
  if [ -f "$dir/pids" ]; then
    # Reverse start order: slurmd, slurmctld, then munged (the others authenticate through it).
    tac "$dir/pids" | while read -r name pid; do kill -TERM "$pid" 2> /dev/null || true; done
    deadline=$((SECONDS + STOP_GRACE_S))
    while read -r name pid; do
      while kill -0 "$pid" 2> /dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
      kill -KILL "$pid" 2> /dev/null || true
    done < "$dir/pids"
    rm -f "$dir/pids"
  fi
  for pid in $(processes_using "$dir"); do kill -KILL "$pid" 2> /dev/null || true; done
  rm -f "$REGISTRY/$(echo "$dir" | tr / _)"
}

clean_stale() {
  local entry dir owner
  for entry in "$REGISTRY"/*; do
    [ -f "$entry" ] || continue
    read -r dir owner < "$entry"
    if ! kill -0 "$owner" 2> /dev/null; then
      echo "slurm_cluster: stopping stale cluster in $dir (owner PID $owner is gone)" >&2
      stop "$dir"
      rm -f "$entry"
    fi
  done
}

command=${1:-help}
[ $# -gt 0 ] && shift
case "$command" in
  check) check ;;
  start) [ $# -ge 1 ] || die "start: expected DIR"; check > /dev/null || { check; exit $EXIT_SKIP; }; start "$@" ;;
  stop) [ $# -eq 1 ] || die "stop: expected DIR"; stop "$1" ;;
  logs) [ $# -eq 1 ] || die "logs: expected DIR"; print_logs "$1" ;;
  clean-stale) clean_stale ;;
  help | -h | --help) usage ;;
  *) usage >&2; exit 2 ;;
esac
