# Part of emulated_cluster.sh (sourced by it): `measure`, the rate or the round trip a node's
# link gives, with tcp_probe (task4_bench/cluster/tcp_probe.cc).
# shellcheck shell=bash

readonly PROBE_PORT=5201
SECONDS_TO_MEASURE=1

find_probe() {
  find_binary tcp_probe DISTLM_TCP_PROBE ||
    die "measure needs tcp_probe: bazel build //task4_bench/cluster:tcp_probe and run bazel-bin/task4_bench/cluster/emulated_cluster, or set DISTLM_TCP_PROBE"
}

cmd_measure() {
  local arg rtt=0 warmup_s=0
  for arg in "$@"; do
    case $arg in
      --seconds=*)
        SECONDS_TO_MEASURE=${arg#--seconds=}
        [[ $SECONDS_TO_MEASURE =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--seconds must be a number, got '$SECONDS_TO_MEASURE'"
        ;;
      --warmup_s=*)
        warmup_s=${arg#--warmup_s=}
        [[ $warmup_s =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--warmup_s must be a number, got '$warmup_s'"
        ;;
      --rtt) rtt=1 ;;
      *) die "unknown option '$arg' for measure" ;;
    esac
  done
  require_root
  [[ -r $STATE_DIR/config ]] || die "no cluster is up (emulated_cluster up N --rate=...)"
  local nodes rate bps
  nodes=$(sed -n 's/^nodes=//p' "$STATE_DIR/config")
  rate=$(sed -n 's/^rate=//p' "$STATE_DIR/config")
  bps=$(sed -n 's/^rate_bits_per_s=//p' "$STATE_DIR/config")
  ((nodes >= 2)) || die "measure needs at least 2 nodes, the cluster has $nodes"
  local probe bytes="" out
  probe=$(find_probe)
  local -a listen_opts=(--listen="$PROBE_PORT") send_opts=(--connect="$(ip_of 1):$PROBE_PORT")
  if ((rtt)); then
    listen_opts+=(--rtt)
    send_opts+=(--rtt)
  elif awk -v w="$warmup_s" 'BEGIN { exit !(w > 0) }'; then
    # Sent for a time, not a size: how much a long link carries in its warm-up is not known.
    listen_opts+=(--skip_s="$warmup_s")
    send_opts+=(--seconds="$(awk -v w="$warmup_s" -v s="$SECONDS_TO_MEASURE" 'BEGIN { print w + s }')")
  else
    # About --seconds at the configured rate (unshaped: 1 GB), at least 1 MB.
    bytes=$(awk -v r="$bps" -v s="$SECONDS_TO_MEASURE" 'BEGIN { b = (r > 0 ? r / 8 * s : 1e9); if (b < 1e6) b = 1e6; printf "%.0f\n", b }')
    send_opts+=(--bytes="$bytes")
  fi
  out=$(mktemp)
  ip netns exec "$(ns_of 1)" "$probe" "${listen_opts[@]}" >"$out" &
  local listener=$!
  if ! ip netns exec "$(ns_of 0)" "$probe" "${send_opts[@]}" >>"$out"; then
    kill "$listener" 2>/dev/null || true
    rm -f "$out"
    die "the probe from $(ip_of 0) to $(ip_of 1) failed (see above)"
  fi
  wait "$listener" || die "the receiving probe in $(ns_of 1) failed (see above)"
  local result
  result=$(cat "$out")
  rm -f "$out"
  local from to
  from=$(ip_of 0)
  to=$(ip_of 1)
  if ((rtt)); then
    local delay delay_us
    delay=$(sed -n 's/^delay=//p' "$STATE_DIR/config")
    delay_us=$(sed -n 's/^delay_us=//p' "$STATE_DIR/config")
    awk -v j="$result" -v d="$delay" -v us="${delay_us:-0}" -v from="$from" -v to="$to" 'BEGIN {
      split("median_ms min_ms max_ms samples", keys, " ")
      for (i = 1; i <= 4; i++) { v[keys[i]] = j; sub(".*\"" keys[i] "\": ", "", v[keys[i]]); sub("[,}].*", "", v[keys[i]]) }
      printf "measured round trip %s -> %s -> %s: median %.3f ms of %d (min %.3f, max %.3f); configured delay %s = %.3f ms round trip\n",
        from, to, from, v["median_ms"], v["samples"], v["min_ms"], v["max_ms"], d, 2 * us / 1e3 }'
    return 0
  fi
  local mbit what
  mbit=$(sed -n 's/.*"mbit_per_s": \([0-9.]*\).*/\1/p' <<<"$result")
  what="for $bytes bytes"
  if [[ -z $bytes ]]; then
    what="after a ${warmup_s} s warm-up ($mbit Mbit/s over the whole stream)"
    mbit=$(sed -n 's/.*"steady_mbit_per_s": \([0-9.]*\).*/\1/p' <<<"$result")
  fi
  if ((bps > 0)); then
    awk -v m="$mbit" -v r="$bps" -v rate="$rate" -v what="$what" -v from="$from" -v to="$to" \
      'BEGIN { printf "measured %s -> %s: %.1f Mbit/s %s; configured %s = %.1f Mbit/s; achieved/configured = %.3f\n", from, to, m, what, rate, r / 1e6, m / (r / 1e6) }'
  else
    echo "measured $from -> $to: $mbit Mbit/s $what; configured unshaped"
  fi
}
