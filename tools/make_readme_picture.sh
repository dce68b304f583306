#!/usr/bin/env bash
# Remakes the README's picture, docs/img/task3_timeline.png: task 3's reference (the bucketed
# DDP, 0.5 MiB buckets) on 2 ranks on 127.0.0.1, traced with --trace, its timeline drawn by the
# gnuplot script //tools:trace writes (trace/timeline.gp), restyled: one update, a title that
# says what to look at, and the legend cut to the phases a reader can see.
#
#   tools/make_readme_picture.sh [OUT_PNG]
#
# Of the traced updates it draws the one whose ranks waited least for each other (on a busy
# machine one rank is sometimes descheduled and the other waits for it in grad_sync). Prints
# //tools:trace's table of the run and keeps the run's folder (it says where). About a minute
# once the three targets are built.
set -euo pipefail
cd "$(dirname "$0")/.."
out_png=$(realpath -m "${1:-docs/img/task3_timeline.png}")

bazel build //task3:reference //tools:launch //tools:trace
run=$(mktemp -d /tmp/distlm_readme_picture.XXXXXX)
bazel-bin/tools/launch --nproc_per_node=2 -- "$PWD/bazel-bin/task3/reference" \
  --max_steps=8 --per_gpu_train_batch_size=8 --max_seq_length=128 --bucket_cap_mb=0.5 \
  --do_eval=false --num_threads=1 --trace --trace_steps=3:8 \
  --output_dir="$run/task3" --overwrite_output_dir >"$run/launch.log" 2>&1 ||
  { tail -20 "$run/launch.log"; exit 1; }
bazel-bin/tools/trace --run_dir="$run/task3"

# The update to draw: the one whose ranks waited least for each other (overlap.json's
# waiting_ms, the larger of the two). Its boxes are copied out of timeline.dat with the time
# counted from the update's start, and only the rows (a rank's main thread, a communication
# lane) that have a box in it are kept. Prints the update, its span in ms, and gnuplot's
# yrange and ytics for the rows kept.
trace="$run/task3/trace"
{ read -r update span margin; read -r yrange; read -r ytics; } < <(python3 - "$trace" <<'PY'
import json, re, sys
trace = sys.argv[1]
waiting = {}
for row in json.load(open(trace + "/overlap.json"))["updates"]:
    waiting[row["update"]] = max(waiting.get(row["update"], 0.0), row["waiting_ms"])
events = [e for e in json.load(open(trace + "/merged.json"))["traceEvents"]
          if e.get("ph") == "X" and e.get("cat") == "update"]
t0 = min(e["ts"] for e in events)
spans = {}
for e in events:
    spans.setdefault(e["args"]["update"], []).append((e["ts"], e["ts"] + e["dur"]))
u = min((u for u in spans if len(spans[u]) == 2 and u in waiting), key=lambda u: waiting[u])
begin = (min(s for s, _ in spans[u]) - t0) / 1000
end = (max(e for _, e in spans[u]) - t0) / 1000
boxes = []
for line in open(trace + "/timeline.dat"):
    x, y, hw, hh, colour = line.split()
    x, hw = float(x), float(hw)
    if x + hw > begin and x - hw < end:
        boxes.append((x - begin, int(y), hw, hh, colour))
labels = dict((int(r), name) for name, r in
              re.findall(r"'([^']*)' (\d+)", open(trace + "/timeline.gp").read().split("set ytics", 1)[1].split("\n", 1)[0]))
rows = {old: new for new, old in enumerate(sorted({b[1] for b in boxes}))}
# "rank R comm L" (a lane of overlapping collectives) reads "rank R all-reduces" where the rank
# has one lane in the update.
lanes = {}
for old in rows:
    lanes.setdefault(labels[old].split(" comm ")[0], []).append(old)
for rank, olds in lanes.items():
    for old in olds:
        if " comm " in labels[old]:
            lane = labels[old].split(" comm ")[1]
            labels[old] = rank + " all-reduces" + ("" if len(olds) == 2 else " " + lane)
with open(trace + "/readme_timeline.dat", "w") as f:
    for x, y, hw, hh, colour in boxes:
        f.write(f"{x:.6f} {rows[y]} {hw} {hh} {colour}\n")
print(u, f"{end - begin:.3f}", f"{0.015 * (end - begin):.3f}")
print(f"[{len(rows) - 0.5}:-0.5]")
print("(" + ", ".join(f"'{labels[old]}' {new}" for old, new in rows.items()) + ")")
PY
)

sed -e "s@^set terminal .*@set terminal pngcairo size 1000,380 font ',11' noenhanced@" \
    -e "s@^set output .*@set output '$out_png'@" \
    -e "s@^set title .*@set title 'task 3 on 2 ranks, one update: the buckets are all-reduced while backward runs'@" \
    -e "s@^set xrange .*@set xrange [-$margin:$span+$margin]@" \
    -e "s@^set yrange .*@set yrange $yrange@" \
    -e "s@^set ytics .*@set ytics $ytics@" \
    -e "s@^set xlabel .*@set xlabel 'ms from the start of update $update'@" \
    -e "s@^set key .*@set key at screen 0.745, screen 0.85 left top vertical Left reverse samplen 2\nset rmargin at screen 0.725@" \
    -e "/^set arrow /d" \
    -e "s@'[^']*timeline.dat'@'$trace/readme_timeline.dat'@" \
    -e "s@, NaN with boxes fs solid 0.9 lc rgb '#[0-9a-f]*' title '\(clip\|optimizer\|snapshot\)'@@g" \
    -e "s@title 'optimizer_step'@title 'optimizer step'@" \
    -e "s@title 'grad_sync'@title 'waiting for the last bucket'@" \
    -e "s@title 'collective'@title 'all-reduce of a bucket'@" \
    "$trace/timeline.gp" >"$run/readme_timeline.gp"
mkdir -p "$(dirname "$out_png")"
gnuplot "$run/readme_timeline.gp"
echo "make_readme_picture: update $update drawn into $out_png ($(stat -c %s "$out_png") bytes); the run is in $run"
