#!/usr/bin/env bash
# Prototype check of NFQUEUE delay emulation (delay_holder) on a copy of emulated_cluster.sh's
# topology: nodes dqn0, dqn1 (interface distlm0, 10.99.0.1/2) with veth peers h0, h1 on a bridge
# that lives in its own namespace dqbr (so nothing is added to the host's namespace), tbf on both
# ends of each link as the script does. Everything is named dq*, and removed on exit.
#
#   test_delay.sh                       # RTT for D = 1, 20, 100 ms; 100 Mbit/s throughput at 20, 100 ms
#   HOOK=egress test_delay.sh           # queue on the sender's OUTPUT instead of the receiver's PREROUTING
#   DELAYS_MS="off 0 20" TPUT_DELAYS_MS="" RATE=1gbit RT=0 TPUT_S=10 BUFS=0 MAX_ADVANCE_US=0 test_delay.sh
# (CC=reno|bbr sets the nodes' congestion control; a namespace may only pick the host's allowed ones)
# (off: no holder, no rule: the baseline)
# Needs root, iptables (apt-get install iptables) and ./delay_holder (./build.sh).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
HOLDER=$HERE/delay_holder
MEASURE="python3 $HERE/measure.py"
HOOK=${HOOK:-ingress}
RATE=${RATE:-100mbit}
DELAYS_MS=${DELAYS_MS-1 20 100}
TPUT_DELAYS_MS=${TPUT_DELAYS_MS-20 100}
TPUT_S=${TPUT_S:-12}
SKIP_S=${SKIP_S:-3}
RT=${RT:-1}
BUFS=${BUFS:-1}
NS=(dqn0 dqn1)
IP=(10.99.0.1 10.99.0.2)
HOLDER_PID=""

cleanup() {
  if [[ -n $HOLDER_PID ]]; then kill "$HOLDER_PID" 2>/dev/null && wait "$HOLDER_PID" 2>/dev/null || true; fi
  local ns
  for ns in dqn0 dqn1 dqbr; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rate_bps=$(awk -v r="$RATE" 'BEGIN { v = r + 0; s = r; sub(/^[0-9.]+/, "", s);
  m = (s == "gbit") ? 1e9 : (s == "mbit") ? 1e6 : (s == "kbit") ? 1e3 : 1; printf "%.0f\n", v * m }')
burst=$(awk -v r="$rate_bps" 'BEGIN { b = r / 8 / 1000; if (b < 131072) b = 131072; printf "%.0f\n", b }')

# tbf as emulated_cluster.sh's shape(): $1 namespace, $2 device, $3 delay in us (sizes the queue).
shape() {
  tc -n "$1" qdisc replace dev "$2" root handle 1: tbf rate "$RATE" burst "$burst" latency "$((5000 + 2 * $3))us"
}

setup() {
  cleanup
  ip netns add dqbr
  ip -n dqbr link add name br0 type bridge forward_delay 0
  ip -n dqbr link set br0 up
  local r
  for r in 0 1; do
    ip netns add "${NS[r]}"
    ip -n dqbr link add "h$r" type veth peer name distlm0 netns "${NS[r]}"
    ip -n dqbr link set "h$r" master br0 up
    ip netns exec "${NS[r]}" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    ip -n "${NS[r]}" addr add "${IP[r]}/24" dev distlm0
    ip -n "${NS[r]}" link set lo up
    ip -n "${NS[r]}" link set distlm0 up
    if [[ -n ${CC:-} ]]; then ip netns exec "${NS[r]}" sysctl -qw net.ipv4.tcp_congestion_control="$CC"; fi
    if ((BUFS)); then
      # A 100 Mbit/s x 200 ms window is 2.5 MB; the default tcp_wmem max (4 MB) is too tight.
      ip netns exec "${NS[r]}" sysctl -qw net.ipv4.tcp_rmem="4096 131072 33554432" \
        net.ipv4.tcp_wmem="4096 65536 33554432"
    fi
  done
}

# Sets delay D (ms) on both nodes: (re)starts the holder, shapes with the matching tbf queue.
# D=off: no holder and no rule (the baseline: tbf only).
set_delay() {
  local d_us r
  if [[ -n $HOLDER_PID ]]; then kill "$HOLDER_PID"; wait "$HOLDER_PID" 2>/dev/null || true; HOLDER_PID=""; fi
  if [[ $1 == off ]]; then
    for r in 0 1; do
      ip netns exec "${NS[r]}" iptables -t raw -F 2>/dev/null || true
      shape "${NS[r]}" distlm0 0
      shape dqbr "h$r" 0
    done
    return 0
  fi
  d_us=$(($1 * 1000))
  local -a rt=()
  ((RT)) && rt=(--rt)
  rm -f "$HERE/.holder.log"  # else the wait below could see the previous holder's "ready"
  "$HOLDER" --delay_us="$d_us" --netns=dqn0 --netns=dqn1 "${rt[@]}" --max_advance_us="${MAX_ADVANCE_US:-300}" 2>"$HERE/.holder.log" &
  HOLDER_PID=$!
  for _ in $(seq 400); do grep -q ready "$HERE/.holder.log" 2>/dev/null && break; sleep 0.05; done
  grep -q ready "$HERE/.holder.log" || { echo "the holder did not get ready in 20 s:"; cat "$HERE/.holder.log"; exit 1; }
  for r in 0 1; do
    ip netns exec "${NS[r]}" iptables -t raw -F
    if [[ $HOOK == ingress ]]; then
      ip netns exec "${NS[r]}" iptables -t raw -A PREROUTING -i distlm0 -j NFQUEUE --queue-num 0
    else
      ip netns exec "${NS[r]}" iptables -t raw -A OUTPUT -o distlm0 -j NFQUEUE --queue-num 0
    fi
    shape "${NS[r]}" distlm0 "$d_us"
    shape dqbr "h$r" "$d_us"
  done
}

cpu_ticks() { if [[ -n $1 ]]; then awk '{ print $14 + $15 }' "/proc/$1/stat"; else echo 0; fi; }  # utime + stime of the holder, in ticks

holder_stats() {
  [[ -n $HOLDER_PID ]] || return 0
  kill -USR1 "$HOLDER_PID"
  sleep 0.2
  tail -n 2 "$HERE/.holder.log" | sed 's/^/    /'
  local r
  for r in 0 1; do  # queue total, copy mode, range, queue_dropped, user_dropped
    echo "    ${NS[r]} nfnetlink_queue: $(ip netns exec "${NS[r]}" cat /proc/net/netfilter/nfnetlink_queue)"
  done
}

setup
echo "hook=$HOOK rate=$RATE rt=$RT bufs=$BUFS cc=$(ip netns exec dqn0 sysctl -n net.ipv4.tcp_congestion_control)"
for d in $DELAYS_MS; do
  set_delay "$d"
  ip netns exec dqn1 $MEASURE rtt-server 5300 &
  server=$!
  out=$(ip netns exec dqn0 $MEASURE rtt-client "${IP[1]}" 5300 20)
  wait "$server"
  echo "RTT D=${d}ms (expect $((2 * ${d/off/0})) ms): $out"
  holder_stats
done
for d in $TPUT_DELAYS_MS; do
  set_delay "$d"
  ip netns exec dqn0 nstat -n  # reset the counters' history
  ip netns exec dqn1 nstat -n
  ticks0=$(cpu_ticks "$HOLDER_PID")
  out_file=$(mktemp)
  ip netns exec dqn1 $MEASURE tput-server 5301 "$SKIP_S" >"$out_file" &
  server=$!
  t0=$(date +%s.%N)
  ip netns exec dqn0 $MEASURE tput-client "${IP[1]}" 5301 "$TPUT_S"
  wait "$server"
  t1=$(date +%s.%N)
  ticks1=$(cpu_ticks "$HOLDER_PID")
  cpu=$(awk -v a="$ticks0" -v b="$ticks1" -v t0="$t0" -v t1="$t1" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.1f", (b - a) / hz / (t1 - t0) * 100 }')
  retrans=$(ip netns exec dqn0 nstat TcpRetransSegs | awk '/TcpRetransSegs/ { print $2 }')
  # Out-of-order segments the receiver saw (the holder must keep the order).
  ofo=$(ip netns exec dqn1 nstat TcpExtTCPOFOQueue | awk '/TcpExtTCPOFOQueue/ { print $2 }')
  # The holder lives in the host namespace (only its threads joined the nodes' ones), so tools
  # that list or signal a namespace's processes (ip netns pids) do not see it.
  in_pids=no
  if [[ -n $HOLDER_PID ]] && ip netns pids dqn1 | grep -qx "$HOLDER_PID"; then in_pids=yes; fi
  echo "throughput D=${d}ms rate=$RATE: $(cat "$out_file") holder_cpu=${cpu}% retrans_segs=${retrans:-0}" \
    "receiver_ofo=${ofo:-0} holder_in_netns_pids=$in_pids"
  rm -f "$out_file"
  holder_stats
done
