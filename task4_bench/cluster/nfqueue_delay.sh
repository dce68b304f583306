# Part of emulated_cluster.sh (sourced by it): the delay on kernels without netem, held in
# user space by delay_holder (task4_bench/cluster/delay_holder.cc) through an NFQUEUE rule in
# each node's namespace.
# shellcheck shell=bash

readonly HOLDER_QUEUE=0  # an NFQUEUE number is per network namespace: the same in every node

# The delay holder of $STATE_DIR/delay_holder.pid, if that process is still one (a program
# named delay_holder: a pid can be reused): SIGTERM (it lets every held packet in and exits), SIGKILL if it takes over 2 s. It
# lives in the host namespace, so signal_namespaces does not reach it; and it goes before the
# namespaces, since its threads keep them alive.
stop_holder() {
  local pid_file=$STATE_DIR/delay_holder.pid pid comm tries
  [[ -r $pid_file ]] || return 0
  read -r pid <"$pid_file" || true
  rm -f "$pid_file"
  [[ $pid =~ ^[0-9]+$ ]] || return 0
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 0
  [[ $comm == delay_holder ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((tries = 0; tries < 40; tries++)); do
    is_running "$pid" || return 0
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
}

# Emulates DELAY without netem on the $1 nodes: starts delay_holder, waits for its "ready", then
# sends every packet each node receives to it. The holder ignores SIGHUP and SIGINT, so that a
# closed terminal after `up`, or a Ctrl-C meant for `run` (which tears down), leaves it be.
# Returns 1, having said why and undone its part, when iptables, the holder or the kernel's
# NFQUEUE are missing.
start_holder() {
  local n=$1 holder r k namespaces="" log=$STATE_DIR/delay_holder.log tries pid err
  if ! command -v iptables >/dev/null; then
    say "no iptables, so no NFQUEUE delay either (Debian: apt-get install iptables)"
    return 1
  fi
  if ! holder=$(find_binary delay_holder DISTLM_DELAY_HOLDER); then
    say "no delay_holder, so no NFQUEUE delay either (bazel build //task4_bench/cluster:delay_holder)"
    return 1
  fi
  for ((r = 0; r < n; r++)); do namespaces+="${namespaces:+,}$(ns_of "$r")"; done
  : >"$log"
  (
    trap '' HUP INT
    exec "$holder" --delay_us="$DELAY_US" --netns="$namespaces" --queue="$HOLDER_QUEUE" --rt \
      </dev/null >/dev/null 2>"$log" 3>&-
  ) &
  pid=$!
  echo "$pid" >"$STATE_DIR/delay_holder.pid"  # for teardown, even if we are killed right now
  for ((tries = 0; tries < 200; tries++)); do
    grep -q "^delay_holder: ready: " "$log" && break
    is_running "$pid" || break
    sleep 0.05
  done
  if ! grep -q "^delay_holder: ready: " "$log"; then
    say "the delay holder did not start, so no NFQUEUE delay either: $(tail -n 1 "$log" | grep . || echo "not ready in 10 s")"
    {
      kill -KILL "$pid"
      wait "$pid"
    } 2>/dev/null  # bash's "Killed" report of the job
    rm -f "$STATE_DIR/delay_holder.pid"
    return 1
  fi
  # Only now: a queue that no program has bound drops every packet sent to it.
  for ((r = 0; r < n; r++)); do
    if ! err=$(ip netns exec "$(ns_of "$r")" iptables -w -t raw -A PREROUTING -i "$NODE_IFACE" \
      -j NFQUEUE --queue-num "$HOLDER_QUEUE" 2>&1); then
      say "iptables cannot send packets to an NFQUEUE here, so no NFQUEUE delay either: $(tail -n 1 <<<"$err")"
      for ((k = 0; k < n; k++)); do ip netns exec "$(ns_of "$k")" iptables -w -t raw -F PREROUTING 2>/dev/null || true; done
      stop_holder
      return 1
    fi
  done
}
