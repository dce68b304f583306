#!/usr/bin/env bash
# emulated_cluster: N "nodes" on one machine, for the multi-node experiments of task 4.
#
# Each node is a network namespace (distlm-ns<r>) with one interface, distlm0, holding
# 10.213.0.<r+1>/24; its veth peer (distlm-h<r>) sits on a bridge (distlm-br) in the host
# namespace. The bridge has no address, so nothing the ranks send can leave the bridge.
#
#   emulated_cluster up N [--rate=1gbit] [--delay=0.1ms]
#   emulated_cluster run N [--rate=..] [--delay=..] [--master_port=29500] -- CMD [ARGS...]
#   emulated_cluster run N [--rate=..] [--delay=..] --launcher=mpirun -- CMD [ARGS...]
#   emulated_cluster measure [--seconds=1] [--warmup_s=0]  # achieved vs configured rate, node 0 -> 1
#   emulated_cluster measure --rtt             # round trip node 0 -> 1 -> 0 vs 2 x the delay
#   emulated_cluster status
#   emulated_cluster down
#
# Links. --rate shapes each node's link with a token bucket (tc tbf) in both directions: on
#   distlm0 (what the node sends) and on distlm-h<r> (what it receives), as a full-duplex NIC
#   of that speed. --delay adds that much latency (tc netem) to every packet a node sends, so
#   one way between two nodes takes --delay and a round trip 2 x --delay. Kernels without
#   netem (this course's VM has tbf and htb but no netem) get the delay from delay_holder
#   instead, and the tool says so ("delay is emulated by holding each packet in user space"):
#   an iptables rule in each node sends every packet the node receives to an NFQUEUE, and one
#   holder process in the host namespace lets each in --delay after it arrived. Held on the
#   receiver, not the sender, so that a held packet no longer counts against the sending
#   socket. Without iptables or the holder the links get the rates only, and the tool says
#   "this kernel has no netem: delay is not emulated; rates are". Each node's TCP buffers may
#   grow to 32 MB, so that one stream fills a long link (100 Mbit/s x 200 ms is 2.5 MB).
# Ranks. `run` brings the cluster up, starts rank r in namespace r with torchrun's variables
#   (RANK=r, WORLD_SIZE=N, MASTER_ADDR=10.213.0.1, MASTER_PORT; LOCAL_RANK=r and
#   LOCAL_WORLD_SIZE=N because the namespaces do share this machine's cores, which the runtime
#   preamble divides among them), prefixes their output lines with "[rank r] ", and ends with
#   the first failing rank's exit code (the others are stopped), or 0. The interface is called
#   distlm0 in every namespace, so one --gloo_iface=distlm0 suits all ranks (Gloo also finds
#   it by itself: it is the only route to the master). The ranks run from the current folder.
#   With --launcher=mpirun, Open MPI's mpirun runs in node 0 with one slot per node and starts
#   its daemons in the other namespaces through an rsh agent (`ip netns exec`); MPI's own
#   traffic and the ranks' then go over distlm0 only. Its output is mpirun's, unprefixed.
# Teardown. `run` tears everything down when it ends, fails or gets SIGINT/SIGTERM/SIGHUP (the
#   signal is first forwarded to every process in the namespaces, SIGTERM follows after
#   DISTLM_CLUSTER_GRACE_S seconds (default 3), then SIGKILL). A failed `up` tears down what it
#   made. Everything is named distlm-*, so `down`, `up` and `run` also remove what a killed
#   (SIGKILL) run left behind, processes in the namespaces and the delay holder included. One
#   cluster per machine: `up` and `run` replace any existing one.
# Needs root (ip netns, ip link, tc); without it the tool says so and exits 2.
# Parts: nfqueue_delay.sh (the delay without netem) and link_measure.sh (`measure`), sourced from
#   beside this script or its runfiles.
set -euo pipefail

readonly PREFIX=distlm
readonly BRIDGE=distlm-br
readonly NODE_IFACE=distlm0
readonly SUBNET=10.213.0
readonly STATE_DIR=/run/distlm-cluster
readonly MAX_NODES=64
GRACE_S=${DISTLM_CLUSTER_GRACE_S:-3}

# Messages go to fd 3, a copy of stderr, so that the watch over the ranks can silence bash's
# own job reports ("Killed  ip netns exec ...") without silencing ours.
exec 3>&2
say() { echo "emulated_cluster: $*" >&3; }
die() {
  echo "error: emulated_cluster: $*" >&3
  exit 2
}
# Runs a command that must work; its own message comes first, then ours.
must() { "$@" || die "could not: $*"; }

usage() {
  cat >&2 <<'EOF'
usage: emulated_cluster up N [--rate=RATE] [--delay=DELAY]
       emulated_cluster run N [--rate=RATE] [--delay=DELAY] [--master_port=P] [--launcher=env|mpirun] -- CMD [ARGS...]
       emulated_cluster measure [--seconds=S] [--warmup_s=S]
       emulated_cluster measure --rtt
       emulated_cluster status
       emulated_cluster down
RATE as tc writes it: 100mbit, 1gbit, 10gbit, 2.5gbit. DELAY: 100us, 0.1ms, 5ms.
EOF
  exit 2
}

ns_of() { echo "${PREFIX}-ns$1"; }
host_veth_of() { echo "${PREFIX}-h$1"; }
ip_of() { echo "${SUBNET}.$(($1 + 1))"; }

require_root() {
  if [[ $(id -u) -ne 0 ]]; then
    die "needs root to create network namespaces, veths, a bridge and tc qdiscs; run it with sudo"
  fi
  local tool
  for tool in ip tc; do
    command -v "$tool" >/dev/null || die "'$tool' is not installed (Debian: apt-get install iproute2)"
  done
}

# Rates and delays are checked here, so tc never sees a value it would misread.
rate_bits_per_s() {
  [[ $1 =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$ ]] ||
    die "--rate must be a number and one of bit, kbit, mbit, gbit, tbit (e.g. 1gbit), got '$1'"
  local scale
  case ${BASH_REMATCH[3]} in
    bit) scale=1 ;; kbit) scale=1e3 ;; mbit) scale=1e6 ;; gbit) scale=1e9 ;; tbit) scale=1e12 ;;
  esac
  awk -v v="${BASH_REMATCH[1]}" -v s="$scale" 'BEGIN { r = v * s; if (r < 8000) exit 1; printf "%.0f\n", r }' ||
    die "--rate must be at least 8kbit, got '$1'"
}

delay_us() {
  [[ $1 =~ ^([0-9]+(\.[0-9]+)?)(us|ms|s)$ ]] || die "--delay must be a number and one of us, ms, s (e.g. 0.1ms), got '$1'"
  local scale
  case ${BASH_REMATCH[3]} in us) scale=1 ;; ms) scale=1e3 ;; s) scale=1e6 ;; esac
  awk -v v="${BASH_REMATCH[1]}" -v s="$scale" 'BEGIN { printf "%.0f\n", v * s }'
}

list_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}-ns[0-9]+$" || true; }
list_links() { ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${PREFIX}-" || true; }
namespace_pids() {
  local ns
  for ns in $(list_namespaces); do ip netns pids "$ns" 2>/dev/null || true; done
}

# Everything of ours that exists, on one line; empty when there is nothing.
leftovers() {
  local what
  what="$(list_namespaces) $(list_links)"
  [[ -e $STATE_DIR ]] && what+=" $STATE_DIR"
  # shellcheck disable=SC2086  # unquoted on purpose: one line, single spaces
  echo $what
}

# Sends signal $1 to every process in our namespaces; waits up to $2 seconds for them to go.
signal_namespaces() {
  local sig=$1 wait_s=$2 pids deadline
  pids=$(namespace_pids)
  [[ -z $pids ]] && return 0
  # shellcheck disable=SC2086  # one pid per word
  kill -s "$sig" $pids 2>/dev/null || true
  deadline=$(($(date +%s%N) + ${wait_s%.*} * 1000000000))
  while [[ -n $(namespace_pids) ]] && (($(date +%s%N) < deadline)); do sleep 0.05; done
}

# Stops every process in the namespaces (SIGTERM, then SIGKILL after the grace) and deletes
# every distlm-* namespace and link. Prints what it could not remove and returns 1 then.
teardown() {
  trap '' INT TERM HUP  # a second Ctrl-C must not leave half a cluster behind
  signal_namespaces TERM "$GRACE_S"
  signal_namespaces KILL 2
  stop_holder
  local link ns
  # Deleting a host-side veth deletes its peer inside the namespace at once; deleting a
  # namespace alone frees its devices asynchronously, so the links go first.
  for link in $(list_links); do
    if [[ $link != "$BRIDGE" ]]; then ip link del "$link" 2>/dev/null || true; fi
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  for ns in $(list_namespaces); do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$STATE_DIR"
  local tries=0
  while [[ -n $(leftovers) ]] && ((tries < 100)); do
    sleep 0.05
    tries=$((tries + 1))
  done
  trap - INT TERM HUP
  if [[ -n $(leftovers) ]]; then
    say "teardown could not remove: $(leftovers)"
    return 1
  fi
}

# Applies the shaping to one end of a node's link: $1 = the namespace ("" = the host's), $2 =
# the device, $3 = 1 to add the delay (the node's sending side). Sets NETEM_MISSING=1 when
# the kernel has no netem.
shape() {
  local -a nsopt=()
  [[ -n $1 ]] && nsopt=(-n "$1")
  local dev=$2 with_delay=$3
  local tbf=()
  if [[ -n $RATE ]]; then
    # burst: at least two 64 KiB GSO packets, or 1 ms at the rate, so the bucket never holds
    # back a rate the link should reach; queue: 5 ms plus a round trip's worth of data.
    local burst queue_us
    burst=$(awk -v r="$RATE_BPS" 'BEGIN { b = r / 8 / 1000; if (b < 131072) b = 131072; printf "%.0f\n", b }')
    queue_us=$((5000 + 2 * DELAY_US))
    tbf=(tbf rate "$RATE" burst "$burst" latency "${queue_us}us")
  fi
  if ((with_delay)) && [[ -n $DELAY ]] && ((NETEM_MISSING == 0)); then
    if tc "${nsopt[@]}" qdisc add dev "$dev" root handle 1: netem delay "$DELAY" limit 1000000 2>/dev/null; then
      ((${#tbf[@]} == 0)) || must tc "${nsopt[@]}" qdisc add dev "$dev" parent 1:1 handle 10: "${tbf[@]}"
      return 0
    fi
    NETEM_MISSING=1
  fi
  ((${#tbf[@]} == 0)) || must tc "${nsopt[@]}" qdisc add dev "$dev" root handle 1: "${tbf[@]}"
  return 0
}

# Creates the cluster of $1 nodes with RATE and DELAY. The caller's EXIT trap tears down on failure.
cluster_up() {
  local n=$1 r ns
  if [[ -n $(leftovers) ]]; then
    say "removing an earlier cluster or a killed run's leftovers: $(leftovers)"
    teardown || die "cannot remove the earlier cluster; see above"
  fi
  mkdir -p "$STATE_DIR"
  must ip link add name "$BRIDGE" type bridge forward_delay 0
  sysctl -qw "net.ipv6.conf.$BRIDGE.disable_ipv6=1" 2>/dev/null || true
  must ip link set "$BRIDGE" up
  NETEM_MISSING=0
  for ((r = 0; r < n; r++)); do
    ns=$(ns_of "$r")
    must ip netns add "$ns"
    must ip link add "$(host_veth_of "$r")" type veth peer name "${PREFIX}-n$r"
    must ip link set "${PREFIX}-n$r" netns "$ns"
    must ip -n "$ns" link set "${PREFIX}-n$r" name "$NODE_IFACE"
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null || true
    must ip -n "$ns" addr add "$(ip_of "$r")/24" dev "$NODE_IFACE"
    must ip -n "$ns" link set lo up
    must ip -n "$ns" link set "$NODE_IFACE" up
    # The window is about half the receive buffer, and the sender keeps what is unacknowledged:
    # Linux's default maxima (6 MB, 4 MB) cap one stream below 100 Mbit/s at a 200 ms round trip.
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_rmem="4096 131072 33554432" \
      net.ipv4.tcp_wmem="4096 16384 33554432" 2>/dev/null || true
    sysctl -qw "net.ipv6.conf.$(host_veth_of "$r").disable_ipv6=1" 2>/dev/null || true
    must ip link set "$(host_veth_of "$r")" master "$BRIDGE"
    must ip link set "$(host_veth_of "$r")" up
    shape "$ns" "$NODE_IFACE" 1
    shape "" "$(host_veth_of "$r")" 0
  done
  local delay_state="none" delay_us=0
  if [[ -n $DELAY ]]; then
    if ((NETEM_MISSING == 0)); then
      delay_state="$DELAY one way"
      delay_us=$DELAY_US
    elif start_holder "$n"; then
      delay_state="$DELAY one way (nfqueue)"
      delay_us=$DELAY_US
      say "this kernel has no netem: delay is emulated by holding each packet in user space (NFQUEUE)"
    else
      delay_state="not emulated (no netem)"
      if [[ -n $RATE ]]; then
        say "this kernel has no netem: delay is not emulated; rates are"
      else
        say "this kernel has no netem: delay is not emulated (and without --rate the links are unshaped)"
      fi
    fi
  fi
  printf 'nodes=%s\nrate=%s\nrate_bits_per_s=%s\ndelay=%s\ndelay_us=%s\n' "$n" "${RATE:-unshaped}" \
    "${RATE_BPS:-0}" "$delay_state" "$delay_us" >"$STATE_DIR/config"
  say "up: $n nodes $(ip_of 0)..$(ip_of $((n - 1))) on $BRIDGE; rate ${RATE:-unshaped}; delay $delay_state"
}

parse_nodes() {
  if ! [[ ${1:-} =~ ^[0-9]+$ ]] || (($1 < 1 || $1 > MAX_NODES)); then
    die "N must be a number of nodes in 1..$MAX_NODES, got '${1:-}'"
  fi
}

RATE="" RATE_BPS="" DELAY="" DELAY_US=0 MASTER_PORT=29500 LAUNCHER=env
parse_link_option() {
  case $1 in
    --rate=*)
      RATE=${1#--rate=}
      RATE_BPS=$(rate_bits_per_s "$RATE") || exit 2
      ;;
    --delay=*)
      DELAY=${1#--delay=}
      DELAY_US=$(delay_us "$DELAY") || exit 2
      ;;
    *) return 1 ;;
  esac
}

cmd_up() {
  parse_nodes "${1:-}"
  local n=$1
  shift
  local arg
  for arg in "$@"; do parse_link_option "$arg" || die "unknown option '$arg' for up"; done
  require_root
  trap 'say "got a signal while coming up: tearing down"; exit 130' INT TERM HUP
  trap 'rc=$?; if ((rc != 0)); then teardown || true; fi; exit $rc' EXIT
  cluster_up "$n"
  trap - EXIT INT TERM HUP
}

RANK_PIDS=()

# Stops the ranks (and everything else in the namespaces): signal $1 (TERM, or the signal the
# tool got), then SIGTERM after the grace, then SIGKILL. The ranks are reaped here, quietly:
# bash would otherwise print "Killed" lines naming the whole rank command.
stop_ranks() {
  {
    if [[ $1 != TERM ]]; then signal_namespaces "$1" "$GRACE_S"; fi
    signal_namespaces TERM "$GRACE_S"
    signal_namespaces KILL 2
    ((${#RANK_PIDS[@]} == 0)) || wait "${RANK_PIDS[@]}"
  } 2>/dev/null || true
}

on_signal() {
  local name=$1 number=$2
  say "got SIG$name: forwarding it to the ranks, then tearing down"
  stop_ranks "$name"
  exit $((128 + number))
}

# True while process $1 has not exited (a zombie has exited).
is_running() {
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z ]]
}

cmd_run() {
  parse_nodes "${1:-}"
  local n=$1
  shift
  while (($#)) && [[ $1 != -- ]]; do
    if ! parse_link_option "$1"; then
      case $1 in
        --launcher=*)
          LAUNCHER=${1#--launcher=}
          [[ $LAUNCHER == env || $LAUNCHER == mpirun ]] || die "--launcher must be env or mpirun, got '$LAUNCHER'"
          ;;
        --master_port=*)
          MASTER_PORT=${1#--master_port=}
          if ! [[ $MASTER_PORT =~ ^[0-9]+$ ]] || ((MASTER_PORT < 1 || MASTER_PORT > 65535)); then
            die "--master_port must be in 1..65535, got '$MASTER_PORT'"
          fi
          ;;
        *) die "unknown option '$1' for run (the command goes after --)" ;;
      esac
    fi
    shift
  done
  (($# >= 2)) || die "no command: usage: emulated_cluster run N [options] -- CMD [ARGS...]"
  shift  # the --
  require_root
  if [[ $LAUNCHER == mpirun ]]; then
    command -v mpirun >/dev/null || die "--launcher=mpirun needs Open MPI's mpirun (Debian: apt-get install openmpi-bin)"
  fi
  trap 'on_signal INT 2' INT
  trap 'on_signal TERM 15' TERM
  trap 'on_signal HUP 1' HUP
  trap 'rc=$?; teardown || true; exit $rc' EXIT
  cluster_up "$n"

  local -a pids=()
  local -A rank_of=()
  local r
  if [[ $LAUNCHER == mpirun ]]; then
    start_mpirun "$n" "$@"
    pids+=("$!")
    rank_of[$!]=mpirun
  fi
  for ((r = 0; r < n; r++)); do
    [[ $LAUNCHER == env ]] || break
    # env resets SIGINT, which a background job of a script inherits as ignored, so a forwarded
    # Ctrl-C reaches the ranks; the line prefixers ignore it and outlive the ranks.
    ip netns exec "$(ns_of "$r")" env --default-signal=INT,QUIT \
      RANK="$r" LOCAL_RANK="$r" WORLD_SIZE="$n" LOCAL_WORLD_SIZE="$n" GROUP_RANK=0 \
      MASTER_ADDR="$(ip_of 0)" MASTER_PORT="$MASTER_PORT" DISTLM_CLUSTER_IFACE="$NODE_IFACE" "$@" \
      > >(trap '' INT; exec sed -u "s/^/[rank $r] /") \
      2> >(trap '' INT; exec sed -u "s/^/[rank $r] /" >&2) 3>&- &
    pids+=("$!")
    rank_of[$!]="rank $r"
  done
  RANK_PIDS=("${pids[@]}")
  say "started $n ranks: $*"

  # Polled rather than `wait -n`: bash forgets a job it has already reported, and then `wait -n`
  # cannot name it; `wait PID` always has the status of a child that has exited.
  local status=0 rc p finished
  local -a still
  exec 2>/dev/null  # bash's job reports; ours use fd 3, the ranks' stderr was bound above
  while ((${#pids[@]} > 0)); do
    finished=""
    for p in "${pids[@]}"; do
      if ! is_running "$p"; then
        finished=$p
        break
      fi
    done
    if [[ -z $finished ]]; then
      sleep 0.05
      continue
    fi
    if wait "$finished" 2>/dev/null; then rc=0; else rc=$?; fi
    still=()
    for p in "${pids[@]}"; do [[ $p == "$finished" ]] || still+=("$p"); done
    pids=("${still[@]}")
    RANK_PIDS=("${pids[@]}")
    r=${rank_of[$finished]}
    if ((rc != 0)); then
      if ((rc > 128)); then
        say "$r was killed by signal $((rc - 128)) (SIG$(kill -l $((rc - 128)) 2>/dev/null || echo '?'))"
      else
        say "$r exited with code $rc"
      fi
      status=$rc
      say "stopping the other ranks, then tearing down"
      stop_ranks TERM
      break
    fi
  done
  if ((status == 0)); then
    if [[ $LAUNCHER == mpirun ]]; then say "mpirun exited 0"; else say "all $n ranks exited 0"; fi
  fi
  exit "$status"
}

# Starts mpirun in node 0 (in the background; $! is its pid) with one slot on every node.
# Open MPI reaches the other nodes through an rsh agent, which here is `ip netns exec` into the
# namespace that holds the "host" address; its daemons and the ranks talk over distlm0 only.
# mpirun sees N hosts with one slot each and would let every rank spin while it waits; the
# ranks share this machine's cores, so they yield instead (at 4 ranks on 2 cores, spinning
# halved the bandwidth MPI got from 1 Gbit/s links).
start_mpirun() {
  local n=$1 r hosts=""
  shift
  for ((r = 0; r < n; r++)); do hosts+="${hosts:+,}$(ip_of "$r")"; done
  local agent=$STATE_DIR/rsh_agent
  {
    echo '#!/bin/sh'
    echo "# mpirun's rsh agent for the emulated cluster: host ${SUBNET}.K is namespace ${PREFIX}-ns(K-1)."
    # shellcheck disable=SC2016  # written for the agent to expand
    echo 'host=$1'
    echo 'shift'
    echo "exec ip netns exec \"${PREFIX}-ns\$((\${host##*.} - 1))\" /bin/sh -c \"\$*\""
  } >"$agent"
  chmod 755 "$agent"
  ip netns exec "$(ns_of 0)" env --default-signal=INT,QUIT OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --host "$hosts" -np "$n" --bind-to none \
    --mca mpi_yield_when_idle 1 \
    --mca plm_rsh_agent "$agent" --mca btl self,tcp --mca btl_tcp_if_include "$NODE_IFACE" \
    --mca oob_tcp_if_include "$NODE_IFACE" "$@" 3>&- &
}

# Prints the path of our binary $1 (tcp_probe, delay_holder): the environment variable named
# $2 if set, else beside this script (bazel-bin or runfiles), else the checkout's bazel-bin.
# Returns 1 when there is none.
find_binary() {
  local name=$1 here candidates c
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  candidates=("${!2:-}" "$here/$name" "${BASH_SOURCE[0]}.runfiles/distlm/task4_bench/cluster/$name"
    "${RUNFILES_DIR:-/nonexistent}/distlm/task4_bench/cluster/$name"
    "$here/../../bazel-bin/task4_bench/cluster/$name")  # the source script in a checkout
  for c in "${candidates[@]}"; do
    [[ -n $c && -x $c ]] && { echo "$c"; return 0; }
  done
  return 1
}

cmd_status() {
  if [[ -r $STATE_DIR/config ]]; then
    tr '\n' ' ' <"$STATE_DIR/config"
    echo
  else
    echo "no cluster is up"
  fi
  local ns
  for ns in $(list_namespaces); do
    echo "$ns: $(ip -n "$ns" -4 -o addr show dev "$NODE_IFACE" 2>/dev/null | awk '{print $4}')" \
      "qdiscs: $(tc -n "$ns" qdisc show dev "$NODE_IFACE" 2>/dev/null | tr '\n' ';')" \
      "processes: $(ip netns pids "$ns" | wc -l)"
  done
  local links
  links=$(list_links)
  # shellcheck disable=SC2086  # one line, single spaces
  [[ -n $links ]] && echo "links:" $links
  return 0
}

cmd_down() {
  (($# == 0)) || die "down takes no arguments"
  require_root
  if [[ -z $(leftovers) ]]; then
    say "nothing to remove"
    return 0
  fi
  say "removing: $(leftovers)"
  teardown || exit 1
  say "down"
}

# The tool's other parts, beside this script (a checkout) or in its runfiles (bazel-bin).
source_part() {
  local here f
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  for f in "$here/$1" "${BASH_SOURCE[0]}.runfiles/distlm/task4_bench/cluster/$1" \
    "${RUNFILES_DIR:-/nonexistent}/distlm/task4_bench/cluster/$1"; do
    # shellcheck source=/dev/null
    [[ -r $f ]] && { source "$f"; return 0; }
  done
  die "its part $1 is missing beside it or in its runfiles (bazel build //task4_bench/cluster:emulated_cluster)"
}
source_part nfqueue_delay.sh
source_part link_measure.sh

main() {
  (($# >= 1)) || usage
  local command=$1
  shift
  case $command in
    up) cmd_up "$@" ;;
    run) cmd_run "$@" ;;
    measure) cmd_measure "$@" ;;
    status) cmd_status "$@" ;;
    down) cmd_down "$@" ;;
    -h | --help | help) usage ;;
    *) die "unknown command '$command' (up, run, measure, status, down)" ;;
  esac
}

main "$@"
