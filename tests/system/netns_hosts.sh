#!/usr/bin/env bash
# Several "hosts" on one machine: network namespaces joined by a bridge, for running mpirun over TCP as
# if across nodes. Needs root and iproute2. Usage: see `netns_hosts.sh help`.
set -euo pipefail

readonly PREFIX=glacier-          # every name this script makes starts with it (namespaces, /etc/netns dirs)
readonly SUBNET_BASE=10.213.47    # a private test subnet; each set of hosts lives behind its own bridge
readonly SUBNET_CIDR=$SUBNET_BASE.0/24
readonly FIRST_HOST_OCTET=11      # h0 is .11, h1 .12, ...
readonly HOST_IFACE=eth0          # the veth end inside every host namespace
readonly MAX_HOSTS=32
readonly EXIT_SKIP=77             # `check`: this machine cannot make namespaces (ctest/automake "skipped")
HOSTS=${NETNS_HOSTS:-4}

usage() {
  cat <<EOF
usage: $0 COMMAND
  check                 exit 0 if namespaces can be made here, else print why and exit $EXIT_SKIP
  run MPIRUN_ARGS...    make $HOSTS hosts (NETNS_HOSTS), run mpirun inside h0 across them over TCP, remove
                        the hosts again (also on error or signal); mpirun's exit status is returned.
                        Example: $0 run -np 4 build/glacier_mpi --model M.gguf --prompts P.jsonl --out R.h5 --bind none
  up NAME               make a lasting set of hosts NAME (for trying things by hand); prints how to use it
  down NAME             remove the set NAME
  mpirun-flags NAME     the mpirun flags (hostfile, rsh agent, TCP interfaces) for the set NAME
  exec NAME HOST CMD... run CMD inside HOST (h0, h1, ...) of the set NAME, with its host name
  clean-stale           remove sets left by killed 'run' invocations (every 'run' does this first)
Hosts are named h0..h$((HOSTS - 1)), addresses $SUBNET_BASE.$FIRST_HOST_OCTET and up, one MPI slot each.
EOF
}

die() { echo "netns_hosts: $*" >&2; exit 1; }
ns_of() { echo "$PREFIX$1-$2"; }             # set, host -> namespace name
bridge_ns_of() { echo "$PREFIX$1-bridge"; }  # the bridge has a namespace of its own: nothing touches the host's
state_dir_of() { echo "/run/glacier-netns/$1"; }
host_ip() { echo "$SUBNET_BASE.$((FIRST_HOST_OCTET + $1))"; }

check() {
  if [ "$(id -u)" -ne 0 ]; then echo "netns_hosts: needs root to create network namespaces (uid $(id -u))"; return $EXIT_SKIP; fi
  if ! command -v ip > /dev/null || ! ip netns list > /dev/null 2>&1; then
    echo "netns_hosts: 'ip netns' is not available (install iproute2)"; return $EXIT_SKIP
  fi
  if ! command -v unshare > /dev/null; then echo "netns_hosts: 'unshare' (util-linux) is missing"; return $EXIT_SKIP; fi
  # Root inside a container may still lack the capability: try once for real.
  local probe="${PREFIX}probe-$$"
  if ! ip netns add "$probe" 2> /dev/null; then
    echo "netns_hosts: 'ip netns add' fails here (no CAP_SYS_ADMIN?)"; return $EXIT_SKIP
  fi
  ip netns delete "$probe"
}

# Removes one set: processes still inside its namespaces (a killed run's ranks), the namespaces (their
# veths and the bridge go with them), the /etc/netns name files and the state directory.
remove_set() {
  local set=$1 ns pid
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$PREFIX$set-(h[0-9]+|bridge)\$" || true); do
    for pid in $(ip netns pids "$ns" 2> /dev/null || true); do kill -KILL "$pid" 2> /dev/null || true; done
    ip netns delete "$ns" 2> /dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  rm -rf "$(state_dir_of "$set")"
}

# A 'run' set is named r<PID> after the script that made it; it is stale when that process is gone
# (or its PID now belongs to something else).
clean_stale() {
  local set pid
  for set in $(ip netns list | awk '{print $1}' | sed -n "s/^$PREFIX\(r[0-9][0-9]*\)-.*/\1/p" | sort -u); do
    pid=${set#r}
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q netns_hosts; then continue; fi
    echo "netns_hosts: removing stale hosts $set (its run, PID $pid, is gone)" >&2
    remove_set "$set"
  done
}

make_set() {
  local set=$1 i ns bridge_ns dir
  [ "$HOSTS" -ge 1 ] && [ "$HOSTS" -le $MAX_HOSTS ] || die "NETNS_HOSTS: expected 1..$MAX_HOSTS, found $HOSTS"
  bridge_ns=$(bridge_ns_of "$set")
  dir=$(state_dir_of "$set")
  mkdir -p "$dir"
  ip netns add "$bridge_ns"
  ip -n "$bridge_ns" link add br0 type bridge
  ip -n "$bridge_ns" link set br0 up
  : > "$dir/hostfile"
  printf '127.0.0.1 localhost\n' > "$dir/hosts"
  for ((i = 0; i < HOSTS; i++)); do printf '%s h%d\n' "$(host_ip $i)" "$i" >> "$dir/hosts"; done
  for ((i = 0; i < HOSTS; i++)); do
    ns=$(ns_of "$set" "h$i")
    ip netns add "$ns"
    # Both ends are created directly in their namespaces, so no name is ever taken in the host's.
    ip link add "$HOST_IFACE" netns "$ns" type veth peer name "h$i" netns "$bridge_ns"
    ip -n "$bridge_ns" link set "h$i" master br0 up
    ip -n "$ns" addr add "$(host_ip $i)/24" dev "$HOST_IFACE"
    ip -n "$ns" link set "$HOST_IFACE" up
    ip -n "$ns" link set lo up
    mkdir -p "/etc/netns/$ns"
    cp "$dir/hosts" "/etc/netns/$ns/hosts"  # `ip netns exec` binds it over /etc/hosts
    echo "h$i slots=1" >> "$dir/hostfile"
  done
  # mpirun's launcher: Open MPI calls it like ssh (`agent [options] HOST COMMAND...`); it enters the
  # host's namespace and gives it its host name, so every daemon and rank sees the right node.
  cat > "$dir/rsh_agent" <<EOF
#!/bin/sh
# plm_rsh_agent for the hosts $set: ssh-style options are dropped, the command runs inside the host.
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
exec ip netns exec "$PREFIX$set-\$host" unshare --uts sh -c "hostname \$host; \$*"
EOF
  chmod +x "$dir/rsh_agent"
  # Without yielding, a rank waiting for a message spins and starves the others on this small machine.
  cat > "$dir/mpirun_flags" <<EOF
--hostfile $dir/hostfile --mca plm_rsh_agent $dir/rsh_agent --mca btl tcp,self --mca btl_tcp_if_include $SUBNET_CIDR --mca oob_tcp_if_include $SUBNET_CIDR --mca mpi_yield_when_idle 1 --bind-to none --allow-run-as-root
EOF
}

exec_in() {  # set host cmd...
  local set=$1 host=$2; shift 2
  ip netns exec "$(ns_of "$set" "$host")" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$host" "$@"
}

# The run's set and mpirun's PID are globals: the EXIT trap runs after run() has returned.
RUN_SET=""
RUN_CHILD=""
cleanup_run() {
  trap - EXIT INT TERM
  if [ -n "$RUN_CHILD" ] && kill -TERM "$RUN_CHILD" 2> /dev/null; then sleep 0.5; fi
  [ -z "$RUN_SET" ] || remove_set "$RUN_SET"
}

run() {
  local status=0 flags
  clean_stale
  RUN_SET="r$$"
  trap cleanup_run EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
  make_set "$RUN_SET"
  read -r -a flags < "$(state_dir_of "$RUN_SET")/mpirun_flags"
  # In the background so that a signal reaches the trap at once instead of after mpirun ends.
  exec_in "$RUN_SET" h0 mpirun "${flags[@]}" "$@" &
  RUN_CHILD=$!
  wait "$RUN_CHILD" || status=$?
  RUN_CHILD=""
  return "$status"
}

command=${1:-help}
[ $# -gt 0 ] && shift
case "$command" in
  check) check ;;
  run) check > /dev/null || { check; exit $EXIT_SKIP; }; run "$@" ;;
  up)
    [ $# -eq 1 ] && [[ $1 =~ ^[a-z][a-z0-9]{0,15}$ ]] && [[ ! $1 =~ ^r[0-9] ]] ||
      die "up: expected a NAME of lowercase letters and digits not starting with r<digit>, found '${1:-}'"
    ip netns list | grep -q "^$PREFIX$1-" && die "up: a set named $1 exists; 'down $1' first"
    make_set "$1"
    echo "made $HOSTS hosts in set $1; run across them with:"
    echo "  $0 exec $1 h0 mpirun \$($0 mpirun-flags $1) -np $HOSTS hostname"
    echo "remove them with: $0 down $1" ;;
  down) [ $# -eq 1 ] || die "down: expected NAME"; remove_set "$1" ;;
  mpirun-flags) [ $# -eq 1 ] && [ -f "$(state_dir_of "$1")/mpirun_flags" ] || die "mpirun-flags: no set '${1:-}'"
    cat "$(state_dir_of "$1")/mpirun_flags" ;;
  exec) [ $# -ge 3 ] || die "exec: expected NAME HOST COMMAND..."; exec_in "$@" ;;
  clean-stale) clean_stale ;;
  help | -h | --help) usage ;;
  *) usage >&2; exit 2 ;;
esac
