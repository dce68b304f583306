#!/usr/bin/env bash
# The margin of task 3b's overlap judged by time (grading/overlap_check.h), measured the way the
# grader meets it: part 1's and task 3's reference files graded as a submission, N times (a new
# seed each), optionally beside K CPU-bound processes (a shared grading host). Prints, per
# grading, the three times of the overlap test (the submission's run, the grader's overlapped and
# serial runs on the limited link), where the submission sits between them (0: at the
# overlapped run, 1: at the serial one; credited up to 0.5), and the task's score.
#
#   tools/overlap_margin.sh [--gradings=N] [--hogs=K] [--model_type=bert|vit] [--mutation=M]
#
# --mutation grades task 3b's grader-private mutant (task3/grading/mutant_ddp.h) instead of the
# reference, e.g. --mutation=forged_overlap.
set -euo pipefail
cd "$(dirname "$0")/.."
gradings=5 hogs=0 model_type=bert mutation=""
for a in "$@"; do
  case "$a" in
    --gradings=*) gradings=${a#*=} ;;
    --hogs=*) hogs=${a#*=} ;;
    --model_type=*) model_type=${a#*=} ;;
    --mutation=*) mutation=${a#*=} ;;
    *) echo "usage: tools/overlap_margin.sh [--gradings=N] [--hogs=K] [--model_type=bert|vit] [--mutation=M]" >&2
       exit 2 ;;
  esac
done
bazel build //grading:autograde //tools:student_kit //task3/grading:mutant_ddp_stage >&2
work=$(mktemp -d "$HOME/overlap_margin.XXXXXX")
hog_pids=()
cleanup() {
  for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
bazel-bin/tools/student_kit --source="$PWD" --out="$work/kit" >&2
mkdir -p "$work/sub/part1" "$work/sub/task3"
cp part1/reference/train_step.cc "$work/sub/part1/"
cp task3/reference/*.cc "$work/sub/task3/"
prebuilt=()
if [ -n "$mutation" ]; then
  prebuilt=(--prebuilt="task3=$PWD/bazel-bin/task3/grading/mutant_ddp_stage"
            --prebuilt_flags="task3=--ddp_mutation=$mutation")
fi
for ((k = 0; k < hogs; k++)); do (while :; do :; done) & hog_pids+=($!); done
echo "| grading | link Mbit/s | submission s | overlapped s | serial s | position | no_sync bytes | task3 |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for ((g = 1; g <= gradings; g++)); do
  bazel-bin/grading/autograde --submission="$work/sub" --kit="$work/kit" --model_type="$model_type" \
    --results="$work/r$g.json" --seed=$((1000 + g)) "${prebuilt[@]}" >"$work/g$g.log" 2>&1 || true
  python3 - "$work/r$g.json" "$g" <<'PY'
import json, re, sys
tests = json.load(open(sys.argv[1]))["tests"]
score = sum(t.get("score", 0) for t in tests if t["name"].startswith("task3"))
most = sum(t.get("max_score", 0) for t in tests if t["name"].startswith("task3"))
out = next((t.get("output", "") for t in tests if "start while backward runs" in t["name"]), "")
no_sync = next((t.get("output", "") for t in tests if "no_sync" in t["name"]), "")
n = re.search(r"counted ([\d.]+) times|, ([\d.]+) times what the main run sent", no_sync)
ratio = next((g for g in n.groups() if g), "") if n else ""
link = re.search(r"([\d.]+) Mbit/s link", out)
link = link.group(1) if link else ""
m = re.search(r"your run took ([\d.]+) s; the grader's own took ([\d.]+) s .* and ([\d.]+) s", out)
if m:
    s, o, w = map(float, m.groups())
    print("| %s | %s | %.1f | %.1f | %.1f | %.2f | %s | %g/%g |" % (sys.argv[2], link, s, o, w, (s - o) / (w - o), ratio, score, most))
else:
    print("| %s | %s | | | | %s | %s | %g/%g |" % (sys.argv[2], link, out.strip().replace("\n", " ")[:100], ratio, score, most))
PY
done
