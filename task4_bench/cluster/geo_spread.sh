#!/usr/bin/env bash
# The geographic spread experiment: one data-parallel program on N emulated nodes linked as a
# LAN, a continent and the world, and its time and bytes per update in each. Root only (the
# emulated cluster's namespaces and links).
#
#   task4_bench/cluster/geo_spread.sh [--nodes=4] [--steps=6] [--settings=lan,continent,world]
#                                     [--out=DIR] -- PROGRAM [FLAGS...]
#
# e.g. sudo task4_bench/cluster/geo_spread.sh -- bazel-bin/task3/student --do_eval=false
#
# The settings (rate per node, one-way delay): lan 1 Gbit/s and 0.1 ms, continent 100 Mbit/s and
# 20 ms, world 50 Mbit/s and 100 ms. Each run gets --max_steps (--steps), --output_dir and
# --overwrite_output_dir after the program's own flags. Over every update of rank 0's log but the
# first (which also connects and warms up): the median and the mean of its step_time_ms, and the
# mean of its comm_bytes (what it handed the collectives). The mean is the one that counts where
# updates differ: task 8's rounds send every H updates, and its median is an update that sends
# nothing. Prints a Markdown table, also written to OUT/table.md.
set -euo pipefail
cd "$(dirname "$0")/../.."

nodes=4 steps=6 settings=lan,continent,world out=""
while [ $# -gt 0 ]; do
  case $1 in
    --nodes=*) nodes=${1#*=} ;;
    --steps=*) steps=${1#*=} ;;
    --settings=*) settings=${1#*=} ;;
    --out=*) out=${1#*=} ;;
    --) shift; break ;;
    *) echo "geo_spread: unknown flag $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
[ $# -gt 0 ] || { echo "geo_spread: no program: give it after --" >&2; exit 2; }
[[ $nodes =~ ^[1-9][0-9]*$ ]] && [ "$nodes" -ge 2 ] || { echo "geo_spread: --nodes=$nodes: need a number >= 2" >&2; exit 2; }
[[ $steps =~ ^[1-9][0-9]*$ ]] && [ "$steps" -ge 2 ] || { echo "geo_spread: --steps=$steps: need a number >= 2" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "geo_spread: needs root (the emulated cluster)" >&2; exit 2; }

# shellcheck source=geo_settings.sh
. task4_bench/cluster/geo_settings.sh
IFS=, read -r -a wanted <<<"$settings"
for s in "${wanted[@]}"; do
  link_of "$s" >/dev/null || { echo "geo_spread: --settings: unknown setting '$s' (lan, continent, world)" >&2; exit 2; }
done

cluster=bazel-bin/task4_bench/cluster/emulated_cluster
[ -x "$cluster" ] || { echo "geo_spread: $cluster is not built: bazel build //task4_bench/cluster:emulated_cluster" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/distlm_geo_spread.XXXXXX)}
mkdir -p "$out"

# Rank 0's step_time_ms after the first update: median and mean; its comm_bytes there: mean.
figures() {
  local log=$1/train_log.jsonl
  [ -s "$log" ] || { echo "- - -"; return; }
  tail -n +2 "$log" | awk '
    { t = ""; b = 0
      if (match($0, /"step_time_ms":[0-9.eE+-]+/)) t = substr($0, RSTART + 15, RLENGTH - 15)
      if (match($0, /"comm_bytes":[0-9.eE+-]+/)) b = substr($0, RSTART + 13, RLENGTH - 13)
      if (t != "") { n++; times[n] = t + 0; sum += t; bytes += b } }
    END {
      if (n == 0) { print "- - -"; exit }
      # A small sort: a few hundred updates at most.
      for (i = 2; i <= n; i++) { v = times[i]; for (j = i - 1; j >= 1 && times[j] > v; j--) times[j + 1] = times[j]; times[j + 1] = v }
      printf "%.1f %.1f %.0f\n", times[int((n + 1) / 2)], sum / n, bytes / n }'
}

table="| setting | rate | one-way delay | time per update, median | mean | bytes per update, mean | x LAN (means) |
| --- | --- | --- | ---: | ---: | ---: | ---: |"
lan_ms=""
for s in "${wanted[@]}"; do
  read -r rate delay <<<"$(link_of "$s")"
  run_dir=$out/$s
  echo "geo_spread: $s ($rate, $delay) on $nodes nodes: $* --max_steps=$steps" >&2
  if ! "$cluster" run "$nodes" --rate="$rate" --delay="$delay" -- "$@" --max_steps="$steps" \
      --output_dir="$run_dir" --overwrite_output_dir >"$out/$s.log" 2>&1; then
    echo "geo_spread: the run at $s failed; the last lines of $out/$s.log:" >&2
    tail -5 "$out/$s.log" >&2
    exit 1
  fi
  read -r median ms bytes <<<"$(figures "$run_dir")"
  [ "$s" = lan ] && lan_ms=$ms
  ratio=-
  [ -n "$lan_ms" ] && [ "$ms" != - ] && ratio=$(awk -v a="$ms" -v b="$lan_ms" 'BEGIN {printf "%.1f", a / b}')
  human=$(awk -v b="$bytes" 'BEGIN {if (b == "-") print "-"; else if (b >= 1e6) printf "%.2f MB", b / 1e6; else printf "%.1f kB", b / 1e3}')
  table+=$'\n'"| $s | $rate | $delay | $median ms | $ms ms | $human | $ratio |"
done
echo "$table" | tee "$out/table.md"
