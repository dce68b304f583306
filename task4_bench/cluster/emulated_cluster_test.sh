#!/usr/bin/env bash
# shellcheck disable=SC2016  # the ranks' commands expand $RANK & co. themselves
# Tests of emulated_cluster.sh with real namespaces, veths, a bridge and tc: bring-up, the rate
# a shaped link delivers, the delay (netem, or NFQUEUE and delay_holder without it: round trips
# and a long link's rate), the ranks' environment, and above all teardown: after a normal end,
# a failing rank, SIGTERM, SIGINT, ranks that ignore both, and a SIGKILLed tool (whose
# leftovers `down` must remove), no distlm-* namespace, link or process, and no delay holder,
# remains.
#
# Needs root; without it every case is SKIPPED (loudly) and the test passes. So are the delay
# cases where the kernel has neither netem nor NFQUEUE (or iptables is missing). It replaces
# any emulated cluster that is up on this machine (there is one per machine).
set -uo pipefail

if [[ -n ${TEST_SRCDIR:-} ]]; then
  TOOL=$TEST_SRCDIR/${TEST_WORKSPACE:-distlm}/task4_bench/cluster/emulated_cluster
else
  TOOL=$(cd "$(dirname "$0")" && pwd)/emulated_cluster.sh
fi
OUT=$(mktemp -d "${TEST_TMPDIR:-/tmp}/emulated_cluster_test.XXXXXX")
FAILURES=0
CURRENT=""

fail() {
  echo "FAILED [$CURRENT]: $*"
  FAILURES=$((FAILURES + 1))
}

# Runs `measure` with the arguments after $2 up to $1 times, stopping at an achieved/configured
# rate of $2; sets BEST to the best ratio. A ratio above 1.02 fails at once: the shaping leaks.
# Several tries, because a busy machine can starve one stream of CPU.
best_rate() {
  local tries=$1 enough=$2 try ratio
  shift 2
  BEST=0
  for ((try = 1; try <= tries; try++)); do
    "$TOOL" measure "$@" >"$OUT/measure.txt" 2>&1 || fail "measure failed: $(cat "$OUT/measure.txt")"
    cat "$OUT/measure.txt"
    ratio=$(sed -n 's/.*achieved\/configured = \([0-9.]*\).*/\1/p' "$OUT/measure.txt")
    awk -v r="${ratio:-0}" 'BEGIN { exit !(r <= 1.02) }' || fail "try $try: achieved/configured rate is '${ratio}' > 1.02"
    BEST=$(awk -v r="${ratio:-0}" -v b="$BEST" 'BEGIN { print (r > b ? r : b) }')
    awk -v b="$BEST" -v e="$enough" 'BEGIN { exit !(b >= e) }' && break
  done
}
start() {
  CURRENT=$1
  echo "=== $1"
}

# Running delay holders (an exited one may stay a zombie until init reaps it).
holder_pids() {
  local p state
  for p in $(pgrep -x delay_holder); do
    state=$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null) || continue
    [[ $state == Z ]] || echo "$p"
  done
}
# Our things that exist right now (empty = nothing).
leftovers() {
  local what p
  what="$(ip netns list 2>/dev/null | awk '{print $1}' | grep '^distlm-') $(ip -o link show | awk -F': ' '{print $2}' | grep '^distlm-')"
  [[ -e /run/distlm-cluster ]] && what+=" /run/distlm-cluster"
  for p in $(holder_pids); do what+=" delay_holder:$p"; done
  # shellcheck disable=SC2086  # one line, single spaces
  echo $what
}
expect_clean() {
  local left
  left=$(leftovers)
  [[ -z $left ]] || fail "left behind after $1: $left"
}
# Processes running `sleep <marker>`: the ranks' children must not outlive the tool.
marker_processes() { pgrep -f "^sleep $1\$" | tr '\n' ' '; }
expect_no_marker() {
  local left
  left=$(marker_processes "$1")
  [[ -z $left ]] || fail "processes of the ranks still running after $2: $left"
}
expect_contains() {
  grep -qF -- "$2" "$1" || fail "output lacks '$2'; it was:
$(cat "$1")"
}
# Waits until every one of $1 namespaces holds a process (the ranks have started).
wait_for_ranks() {
  local n=$1 tries r ready
  for ((tries = 0; tries < 200; tries++)); do
    ready=0
    for ((r = 0; r < n; r++)); do
      [[ -n $(ip netns pids "distlm-ns$r" 2>/dev/null) ]] && ready=$((ready + 1))
    done
    ((ready == n)) && return 0
    sleep 0.05
  done
  fail "the ranks did not start within 10 s"
  return 1
}

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIPPED: emulated_cluster_test needs root (network namespaces, veths, tc); nothing was tested"
  exit 0
fi
if ! "$TOOL" up 1 >"$OUT/probe.txt" 2>&1; then
  echo "SKIPPED: this machine does not let root create network namespaces and veths; nothing was tested:"
  cat "$OUT/probe.txt"
  "$TOOL" down >/dev/null 2>&1
  exit 0
fi
"$TOOL" down >/dev/null 2>&1

# Job control: background jobs get their own process group and do not ignore SIGINT, so the
# tool can trap the SIGINT we send it (as after a Ctrl-C in a terminal). Their own group also
# keeps them out of reach of a signal to ours (Bazel's timeout), so we clean up ourselves.
set -m
tool=""
cleanup() {
  [[ -n $tool ]] && kill -KILL "$tool" 2>/dev/null
  "$TOOL" down >/dev/null 2>&1
  rm -rf "$OUT"
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 143' TERM INT HUP

start "non-root users are refused"
if command -v setpriv >/dev/null; then
  # A copy, with its parts, that the user nobody can reach (the runfiles live under root's home).
  copy=$(mktemp -d /tmp/distlm_cluster_nonroot.XXXXXX)
  cp "$TOOL" "$copy/emulated_cluster"
  cp "$(dirname "$TOOL")/nfqueue_delay.sh" "$(dirname "$TOOL")/link_measure.sh" "$copy/"
  chmod 755 "$copy" "$copy/emulated_cluster"
  chmod 644 "$copy/nfqueue_delay.sh" "$copy/link_measure.sh"
  setpriv --reuid=65534 --regid=65534 --clear-groups "$copy/emulated_cluster" up 2 >"$OUT/nonroot.txt" 2>&1
  rc=$?
  rm -rf "$copy"
  ((rc == 2)) || fail "exit code $rc, expected 2"
  expect_contains "$OUT/nonroot.txt" "error: emulated_cluster: needs root"
  expect_clean "a refused non-root run"
else
  echo "SKIPPED: no setpriv, so the non-root refusal was not checked"
fi

start "bad arguments are one-line errors and create nothing"
for args in "up 0" "up 65" "up 2 --rate=fast" "up 2 --delay=5" "run 2" "run 2 --bogus -- true" "frobnicate"; do
  # shellcheck disable=SC2086
  "$TOOL" $args >"$OUT/bad.txt" 2>&1
  rc=$?
  ((rc == 2)) || fail "'$args' exited $rc, expected 2"
  grep -q "^error: emulated_cluster: " "$OUT/bad.txt" || fail "'$args' gave no error line: $(cat "$OUT/bad.txt")"
done
expect_clean "bad arguments"

start "up builds nodes, addresses and shaped links; down removes them"
"$TOOL" up 3 --rate=100mbit >"$OUT/up.txt" 2>&1 || fail "up failed: $(cat "$OUT/up.txt")"
for r in 0 1 2; do
  addr=$(ip -n "distlm-ns$r" -4 -o addr show dev distlm0 | awk '{print $4}')
  [[ $addr == "10.213.0.$((r + 1))/24" ]] || fail "node $r has address '$addr'"
  tc -n "distlm-ns$r" qdisc show dev distlm0 | grep -q "tbf 1: root .*rate 100Mbit" ||
    fail "node $r's sending side is not shaped: $(tc -n "distlm-ns$r" qdisc show dev distlm0)"
  tc qdisc show dev "distlm-h$r" | grep -q "tbf 1: root .*rate 100Mbit" ||
    fail "node $r's receiving side is not shaped: $(tc qdisc show dev "distlm-h$r")"
  [[ $(cat "/sys/class/net/distlm-h$r/master/ifindex" 2>/dev/null) == $(cat /sys/class/net/distlm-br/ifindex) ]] ||
    fail "distlm-h$r is not on the bridge"
done
# The bridge carries no address: nothing the ranks send has a way out of it.
ip -o addr show dev distlm-br | grep -q inet && fail "the bridge has an address: $(ip -o addr show dev distlm-br)"
"$TOOL" down >"$OUT/down.txt" 2>&1 || fail "down failed: $(cat "$OUT/down.txt")"
expect_clean "down"

start "a shaped link delivers its rate"
"$TOOL" up 2 --rate=100mbit >/dev/null 2>&1 || fail "up failed"
# tbf counts whole frames; TCP payload is 1448 of each 1514-byte frame, so about 0.956 is
# expected. The best of three below 0.85 means the shaping (or the probe) is broken.
best_rate 3 0.85 --seconds=0.5
awk -v b="$BEST" 'BEGIN { exit !(b >= 0.85) }' || fail "the best achieved/configured rate of 3 is '$BEST' < 0.85"
"$TOOL" down >/dev/null 2>&1
expect_clean "measure"

start "delay: netem is used where the kernel has it, else NFQUEUE, and what is used is said"
# DELAY: netem, nfqueue, or "" (neither: the delay checks below are skipped).
DELAY=""
"$TOOL" up 2 --rate=100mbit --delay=2ms >"$OUT/delay.txt" 2>&1 || fail "up with --delay failed: $(cat "$OUT/delay.txt")"
if tc -n distlm-ns0 qdisc show dev distlm0 | grep -q netem; then
  DELAY=netem
  tc -n distlm-ns0 qdisc show dev distlm0 | grep -q "delay 2ms" || fail "netem without the 2ms delay"
  tc -n distlm-ns0 qdisc show dev distlm0 | grep -q "rate 100Mbit" || fail "netem without the rate"
  grep -q "no netem" "$OUT/delay.txt" && fail "netem is there but the tool says it is not"
elif grep -qF "delay is emulated by holding each packet in user space (NFQUEUE)" "$OUT/delay.txt"; then
  DELAY=nfqueue
  expect_contains "$OUT/delay.txt" "this kernel has no netem: delay is emulated by holding each packet in user space (NFQUEUE)"
  expect_contains "$OUT/delay.txt" "delay 2ms one way (nfqueue)"
  grep -qx "delay=2ms one way (nfqueue)" /run/distlm-cluster/config ||
    fail "the config does not say how the delay is made: $(cat /run/distlm-cluster/config)"
  for r in 0 1; do
    ip netns exec "distlm-ns$r" iptables -t raw -S PREROUTING | grep -q -- "-i distlm0 -j NFQUEUE --queue-num 0" ||
      fail "node $r sends no packet to the queue: $(ip netns exec "distlm-ns$r" iptables -t raw -S PREROUTING)"
  done
  [[ -n $(holder_pids) ]] || fail "the tool says NFQUEUE, but no delay_holder runs"
  tc -n distlm-ns0 qdisc show dev distlm0 | grep -q "rate 100Mbit" || fail "the NFQUEUE delay lost the rate"
else
  expect_contains "$OUT/delay.txt" "this kernel has no netem: delay is not emulated; rates are"
  tc -n distlm-ns0 qdisc show dev distlm0 | grep -q "rate 100Mbit" || fail "no netem, and the rate is lost too"
  echo "SKIPPED: this machine has neither netem nor a working NFQUEUE (iptables, nfnetlink_queue, delay_holder):" \
    "the delay's round trips and rate were not checked. The tool said:"
  cat "$OUT/delay.txt"
fi
"$TOOL" down >/dev/null 2>&1
expect_clean "the delay case"

# Prints the median and the least round trip (ms) of `measure --rtt` on the cluster that is up.
rtt_figures() {
  "$TOOL" measure --rtt >"$OUT/rtt.txt" 2>&1 || fail "measure --rtt failed: $(cat "$OUT/rtt.txt")"
  cat "$OUT/rtt.txt" >&2
  sed -n 's/.*: median \([0-9.]*\) ms of [0-9]* (min \([0-9.]*\),.*/\1 \2/p' "$OUT/rtt.txt"
}

if [[ -n $DELAY ]]; then
  start "round trips between two nodes take 2 x --delay ($DELAY)"
  # The rule: what the delay adds to a round trip is within 10 % of 2 x D. What it adds is a
  # TCP request/response time (64 bytes each way, 20 of them) at --delay=D minus the same on the
  # same link without --delay (here 0.02-0.15 ms): netem, too, adds its delay to the link's own
  # round trip, and at D = 1 ms that round trip alone would spend up to three quarters of the
  # 0.2 ms tolerance. The least round trip is the link's: a busy machine only adds to a round
  # trip (the probe's two processes wake late), and under the test suite the median at 1 ms
  # came out 0.2 ms over 2 ms with the least at 2.09. So the least is held to 10 %, and the
  # median, what a program sees most of the time, to 25 %.
  "$TOOL" up 2 --rate=100mbit >/dev/null 2>&1 || fail "up failed"
  read -r base base_least <<<"$(rtt_figures)"
  for d in 1 20 100; do
    "$TOOL" up 2 --rate=100mbit --delay="${d}ms" >/dev/null 2>&1 || fail "up with --delay=${d}ms failed"
    read -r rtt least <<<"$(rtt_figures)"
    awk -v m="${least:-0}" -v b="${base_least:-0}" -v d="$d" 'BEGIN { added = m - b; exit !(added >= 1.8 * d && added <= 2.2 * d) }' ||
      fail "--delay=${d}ms: the least round trip is '${least}' ms, the undelayed link's '${base_least}' ms: the delay adds not 2 x ${d} ms +-10 %"
    awk -v m="${rtt:-0}" -v b="${base:-0}" -v d="$d" 'BEGIN { added = m - b; exit !(added >= 1.8 * d && added <= 2.5 * d) }' ||
      fail "--delay=${d}ms: the median round trip is '${rtt}' ms, the undelayed link's '${base}' ms: the delay adds not 2 x ${d} ms -10 % +25 %"
  done

  start "a 100 Mbit/s link with --delay=100ms still gives its rate ($DELAY)"
  # The cluster of --delay=100ms above. One stream needs a 2.5 MB window for 100 Mbit/s over a
  # 200 ms round trip; it gets there within about 1.5 s (slow start, then the congestion
  # controller's probing), so the rate counts from 2 s on, for 2 s. The rule: within 10 % of
  # the configured rate (TCP's payload is about 0.956 of tbf's frames, so about 0.956 is
  # expected), and at most 1.02 (above, the shaping leaks). Best of two, as a busy machine can
  # starve one stream of CPU.
  best_rate 2 0.9 --warmup_s=2 --seconds=2
  awk -v b="$BEST" 'BEGIN { exit !(b >= 0.9) }' ||
    fail "the best steady achieved/configured rate of 2 over a 100 ms delay is '$BEST' < 0.9"
  "$TOOL" down >/dev/null 2>&1
  expect_clean "the delay's round trips and rate"
fi

start "run gives each rank its variables and prefixed output, then tears down"
"$TOOL" run 2 -- sh -c 'echo "rank=$RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT"; ip -4 -o addr show dev distlm0' \
  >"$OUT/run.txt" 2>&1
rc=$?
((rc == 0)) || fail "run exited $rc"
expect_contains "$OUT/run.txt" "[rank 0] rank=0 world=2 master=10.213.0.1:29500"
expect_contains "$OUT/run.txt" "[rank 1] rank=1 world=2 master=10.213.0.1:29500"
expect_contains "$OUT/run.txt" "10.213.0.2/24"
expect_contains "$OUT/run.txt" "all 2 ranks exited 0"
expect_clean "a successful run"

start "run --launcher=mpirun puts one MPI rank in each namespace"
if command -v mpirun >/dev/null; then
  "$TOOL" run 2 --launcher=mpirun -- sh -c 'echo "mpi rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE at $(ip -4 -o addr show dev distlm0 | awk "{print \$4}")"' \
    >"$OUT/mpirun.txt" 2>&1
  rc=$?
  ((rc == 0)) || fail "run --launcher=mpirun exited $rc: $(cat "$OUT/mpirun.txt")"
  expect_contains "$OUT/mpirun.txt" "mpi rank 0 of 2 at 10.213.0.1/24"
  expect_contains "$OUT/mpirun.txt" "mpi rank 1 of 2 at 10.213.0.2/24"
  expect_clean "an mpirun run"
  "$TOOL" run 2 --launcher=mpirun -- sleep 3190 >"$OUT/mpirun_term.txt" 2>&1 &
  tool=$!
  wait_for_ranks 2
  for ((tries = 0; tries < 200; tries++)); do
    [[ -n $(marker_processes 3190) ]] && break
    sleep 0.05
  done
  kill -TERM "$tool"
  wait "$tool"
  rc=$?
  ((rc == 143)) || fail "exit code $rc after SIGTERM under mpirun, expected 143"
  expect_clean "SIGTERM under mpirun"
  expect_no_marker 3190 "SIGTERM under mpirun"
else
  echo "SKIPPED: no mpirun, so --launcher=mpirun was not checked"
fi

start "a failing rank stops the others and its code is the tool's"
"$TOOL" run 3 -- sh -c 'if [ "$RANK" = 1 ]; then sleep 0.3; exit 3; fi; exec sleep 3171' >"$OUT/fail.txt" 2>&1
rc=$?
((rc == 3)) || fail "exit code $rc, expected rank 1's 3"
expect_contains "$OUT/fail.txt" "rank 1 exited with code 3"
expect_clean "a failed run"
expect_no_marker 3171 "a failed run"

for sig in TERM INT; do
  start "SIGTERM/SIGINT mid-run: SIG$sig"
  marker=$((3172 + ${#sig}))
  "$TOOL" run 2 --rate=100mbit -- sleep "$marker" >"$OUT/sig.txt" 2>&1 &
  tool=$!
  wait_for_ranks 2
  [[ -n $(leftovers) ]] || fail "nothing was up while the ranks ran"
  kill -s "$sig" "$tool"
  wait "$tool"
  rc=$?
  expected=130
  if [[ $sig == TERM ]]; then expected=143; fi
  ((rc == expected)) || fail "exit code $rc after SIG$sig, expected $expected"
  expect_contains "$OUT/sig.txt" "got SIG$sig: forwarding it to the ranks, then tearing down"
  expect_clean "SIG$sig"
  expect_no_marker "$marker" "SIG$sig"
done

start "ranks that ignore SIGTERM and SIGINT are killed"
DISTLM_CLUSTER_GRACE_S=1 "$TOOL" run 2 -- sh -c 'trap "" TERM INT; sleep 3180 & wait' >"$OUT/stubborn.txt" 2>&1 &
tool=$!
wait_for_ranks 2
sleep 0.2  # let the shells set their traps
t0=$(date +%s)
kill -TERM "$tool"
wait "$tool"
rc=$?
((rc == 143)) || fail "exit code $rc, expected 143"
(($(date +%s) - t0 <= 8)) || fail "teardown took $(($(date +%s) - t0)) s with a 1 s grace"
expect_clean "SIGTERM with stubborn ranks"
expect_no_marker 3180 "SIGTERM with stubborn ranks"

start "a SIGKILLed tool leaves leftovers that down removes"
# With the NFQUEUE delay, the holder (in the host namespace) is among them.
delay_opt=()
[[ $DELAY == nfqueue ]] && delay_opt=(--delay=5ms)
"$TOOL" run 2 "${delay_opt[@]}" -- sleep 3181 >"$OUT/killed.txt" 2>&1 &
tool=$!
wait_for_ranks 2
{
  kill -KILL "$tool"
  wait "$tool"
} 2>/dev/null  # bash's "Killed" report of the job
[[ -n $(leftovers) ]] || fail "a SIGKILLed tool cleaned up: the test cannot see down at work"
if [[ $DELAY == nfqueue && -z $(holder_pids) ]]; then
  fail "the delay holder of a SIGKILLed tool is gone: the test cannot see down stop it"
fi
[[ -n $(marker_processes 3181) ]] || fail "the ranks of a SIGKILLed tool are gone: the test cannot see down stop them"
"$TOOL" down >"$OUT/down_after_kill.txt" 2>&1 || fail "down failed: $(cat "$OUT/down_after_kill.txt")"
expect_clean "down after a SIGKILL"
expect_no_marker 3181 "down after a SIGKILL"

start "up replaces a killed run's leftovers"
"$TOOL" run 2 -- sleep 3182 >/dev/null 2>&1 &
tool=$!
wait_for_ranks 2
{
  kill -KILL "$tool"
  wait "$tool"
} 2>/dev/null  # bash's "Killed" report of the job
"$TOOL" up 1 >"$OUT/up_after_kill.txt" 2>&1 || fail "up over leftovers failed: $(cat "$OUT/up_after_kill.txt")"
expect_contains "$OUT/up_after_kill.txt" "removing an earlier cluster or a killed run's leftovers"
[[ $(ip netns list | grep -c '^distlm-') == 1 ]] || fail "expected exactly the new node: $(leftovers)"
expect_no_marker 3182 "up over leftovers"
"$TOOL" down >/dev/null 2>&1
expect_clean "the last down"

if ((FAILURES > 0)); then
  echo "$FAILURES check(s) FAILED"
  exit 1
fi
echo "all emulated_cluster checks passed"
