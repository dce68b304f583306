#!/usr/bin/env bash
# Task 8c across an emulated link: N elastic workers started as a cluster's nodes start them (no
# launcher, which would end them all at the first death), one killed in an update, and a new
# worker started in the same node the moment it dies, to join in its slot. Prints what the
# workers said of the leave and the join, and rank 0's time of every update around them, so the
# cost of each is read off the link it happened on. Root only (the emulated cluster).
#
#   task4_bench/cluster/leave_and_join.sh [--nodes=4] [--setting=world] [--kill=SLOT:UPDATE]
#                                         [--steps=60] [--out=DIR] -- PROGRAM [FLAGS...]
#
# e.g. sudo task4_bench/cluster/leave_and_join.sh -- bazel-bin/task8/reference --inner_steps=10
#
# The settings are geo_spread.sh's (geo_settings.sh): lan 1 Gbit/s and 0.1 ms, continent 100 Mbit/s and 20 ms,
# world 50 Mbit/s and 100 ms. --kill=2:23 (the default) kills slot 2 in its 23rd update
# (DISTLM_FAULT_KILL, common/train/trainer.cc). Every worker gets --elastic, --max_steps
# (--steps), --save_every_rank, --output_dir=OUT/run and the cluster's address after the
# program's own flags; the first N --overwrite_output_dir, the joiner --join. Give the program a
# --dist_timeout_s: the survivors that were not the lost worker's neighbours in Gloo's ring learn
# of the loss when their collective's deadline passes (300 s by default). Each worker's output
# is in OUT/worker_<slot>.log, the joiner's in OUT/joiner.log.
set -euo pipefail
cd "$(dirname "$0")/../.."

nodes=4 setting=world kill=2:23 steps=60 out=""
while [ $# -gt 0 ]; do
  case $1 in
    --nodes=*) nodes=${1#*=} ;;
    --setting=*) setting=${1#*=} ;;
    --kill=*) kill=${1#*=} ;;
    --steps=*) steps=${1#*=} ;;
    --out=*) out=${1#*=} ;;
    --) shift; break ;;
    *) echo "leave_and_join: unknown flag $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
[ $# -gt 0 ] || { echo "leave_and_join: no program: give it after --" >&2; exit 2; }
[[ $nodes =~ ^[0-9]+$ ]] && [ "$nodes" -ge 3 ] || { echo "leave_and_join: --nodes=$nodes: need a number >= 3" >&2; exit 2; }
[[ $steps =~ ^[1-9][0-9]*$ ]] || { echo "leave_and_join: --steps=$steps: need a positive number" >&2; exit 2; }
[[ $kill =~ ^([0-9]+):([1-9][0-9]*)$ ]] || { echo "leave_and_join: --kill=$kill: need SLOT:UPDATE" >&2; exit 2; }
slot=${BASH_REMATCH[1]} update=${BASH_REMATCH[2]}
{ [ "$slot" -ge 1 ] && [ "$slot" -lt "$nodes" ]; } ||
  { echo "leave_and_join: --kill=$kill: the slot must be 1..$((nodes - 1)) (slot 0 holds the store)" >&2; exit 2; }
[ "$update" -lt "$steps" ] || { echo "leave_and_join: --kill=$kill: the update must come before --steps=$steps" >&2; exit 2; }
# shellcheck source=geo_settings.sh
. task4_bench/cluster/geo_settings.sh
link_of "$setting" >/dev/null || { echo "leave_and_join: --setting=$setting: use lan, continent or world" >&2; exit 2; }
read -r rate delay <<<"$(link_of "$setting")"
[ "$(id -u)" = 0 ] || { echo "leave_and_join: needs root (the emulated cluster)" >&2; exit 2; }
cluster=bazel-bin/task4_bench/cluster/emulated_cluster
[ -x "$cluster" ] || { echo "leave_and_join: $cluster is not built: bazel build //task4_bench/cluster:emulated_cluster" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/distlm_leave_and_join.XXXXXX)}
mkdir -p "$out"

"$cluster" up "$nodes" --rate="$rate" --delay="$delay"
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT
worker() {  # slot, then env's words: VAR=VALUE..., the program, its flags
  local s=$1
  shift
  ip netns exec "distlm-ns$s" env "$@" --elastic --max_steps="$steps" --save_every_rank \
    --output_dir="$out/run" --master_ip=10.213.0.1 --master_port=29500 --world_size="$nodes" --local_rank="$s"
}
program=("$@")
pids=()
for ((s = 0; s < nodes; s++)); do
  fault=()
  [ "$s" = "$slot" ] && fault=(DISTLM_FAULT_KILL="$slot:$update")
  worker "$s" "${fault[@]}" "${program[@]}" --overwrite_output_dir >"$out/worker_$s.log" 2>&1 &
  pids+=("$!")
done
start=$(date +%s.%N)
set +e
wait "${pids[$slot]}"
echo "leave_and_join: slot $slot ended (exit $?) after $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s; its joiner starts now" >&2
worker "$slot" "${program[@]}" --join >"$out/joiner.log" 2>&1 &
joiner=$!
status=0
for ((s = 0; s < nodes; s++)); do
  [ "$s" = "$slot" ] && continue
  wait "${pids[$s]}" || { echo "leave_and_join: slot $s failed; see $out/worker_$s.log" >&2; status=1; }
done
wait "$joiner" || { echo "leave_and_join: the joiner failed; see $out/joiner.log" >&2; status=1; }
set -e

echo "## What the workers said"
grep -h "task8:" "$out"/worker_*.log "$out/joiner.log" | sort -u
echo "## Rank 0's updates around the leave and the join"
log=$out/run/train_log.jsonl
python3 - "$log" "$update" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
kill = int(sys.argv[2])
marks = [l["step"] for l in lines if "left" in l or "joined" in l]
near = sorted({s for m in marks + [kill] for s in range(m - 2, m + 3)})
times = [l["step_time_ms"] for l in lines]
print("| update | step_time_ms | comm_bytes | who left and joined (ms) |")
print("| ---: | ---: | ---: | --- |")
for l in lines:
    if l["step"] not in near:
        continue
    what = ", ".join(f"{k} {l[k]:.0f}" if k.endswith("_ms") else f"{k} {l[k]}"
                     for k in ("left", "failed_after_ms", "regroup_ms", "joined", "admit_ms") if k in l)
    print(f"| {l['step']} | {l['step_time_ms']:.0f} | {l.get('comm_bytes', 0)} | {what} |")
quiet = sorted(t for l, t in zip(lines, times) if l["step"] not in near and l["step"] > 1)
if quiet:
    print(f"the other updates: median {quiet[len(quiet) // 2]:.0f} ms, mean {sum(quiet) / len(quiet):.0f} ms")
PY
exit "$status"
