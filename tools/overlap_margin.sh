#!/usr/bin/env bash
# The margin of task 3b's overlap judged by time (grading/overlap_check.h), measured the way the
# grader meets it: part 1's and task 3's reference files graded as a submission, N times (a new
# seed each), optionally beside K CPU-bound processes (a shared grading host). Prints, per
# grading, the three times of the overlap test (the submission's run, the grader's overlapped and
# serial runs on the limited link), where the submission sits between them (0: at the
# overlapped run, 1: at the serial one; credited up to 0.5), task 3's score, the whole score and
# the grading's seconds, then where each grading's time went (the autograder's last line).
#
#   tools/overlap_margin.sh [--gradings=N] [--hogs=K] [--model_type=bert|vit] [--mutation=M] [--all_stages]
#
# --all_stages submits every stage's reference files, not only part 1's and task 3's: the whole
# course graded, as a shared grading host meets it.
# --mutation grades task 3b's grader-private mutant (task3/grading/mutant_ddp.h) instead of the
# reference, e.g. --mutation=forged_overlap.
set -euo pipefail
cd "$(dirname "$0")/.."
gradings=5 hogs=0 model_type=bert mutation="" all_stages=0
for a in "$@"; do
  case "$a" in
    --gradings=*) gradings=${a#*=} ;;
    --hogs=*) hogs=${a#*=} ;;
    --model_type=*) model_type=${a#*=} ;;
    --mutation=*) mutation=${a#*=} ;;
    --all_stages) all_stages=1 ;;
    *) echo "usage: tools/overlap_margin.sh [--gradings=N] [--hogs=K] [--model_type=bert|vit] [--mutation=M] [--all_stages]" >&2
       exit 2 ;;
  esac
done
bazel build //grading:autograde //tools:student_kit //task3/grading:mutant_ddp_stage //common/stages:stages_json >&2
work=$(mktemp -d "$HOME/overlap_margin.XXXXXX")
hog_pids=()
cleanup() {
  for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
bazel-bin/tools/student_kit --source="$PWD" --out="$work/kit" >&2
# Each stage's files as common/stages/stages.bzl lists them, from its reference/ folder.
python3 - "$work/sub" "$all_stages" <<'PY'
import json, os, shutil, sys
for st in json.load(open("bazel-bin/common/stages/stages.json"))["stages"]:
    if sys.argv[2] == "1" or st["id"] in ("part1", "task3"):
        os.makedirs(os.path.join(sys.argv[1], st["id"]), exist_ok=True)
        for f in st["files"]:
            shutil.copy(os.path.join(st["id"], "reference", f), os.path.join(sys.argv[1], st["id"], f))
PY
prebuilt=()
if [ -n "$mutation" ]; then
  prebuilt=(--prebuilt="task3=$PWD/bazel-bin/task3/grading/mutant_ddp_stage"
            --prebuilt_flags="task3=--ddp_mutation=$mutation")
fi
for ((k = 0; k < hogs; k++)); do (while :; do :; done) & hog_pids+=($!); done
echo "| grading | link Mbit/s | submission s | overlapped s | serial s | position | no_sync bytes | task3 | score | seconds |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for ((g = 1; g <= gradings; g++)); do
  bazel-bin/grading/autograde --submission="$work/sub" --kit="$work/kit" --model_type="$model_type" \
    --results="$work/r$g.json" --seed=$((1000 + g)) "${prebuilt[@]}" >"$work/g$g.log" 2>&1 || true
  python3 - "$work/r$g.json" "$g" "$work/g$g.log" <<'PY'
import json, re, sys
tests = json.load(open(sys.argv[1]))["tests"]
total = "%g/%g" % (sum(t.get("score", 0) for t in tests), sum(t.get("max_score", 0) for t in tests))
graded = re.search(r"graded in (\d+) s", open(sys.argv[3]).read())
total += " | " + (graded.group(1) if graded else "")
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
    print("| %s | %s | %.1f | %.1f | %.1f | %.2f | %s | %g/%g | %s |" % (sys.argv[2], link, s, o, w, (s - o) / (w - o), ratio, score, most, total))
else:
    print("| %s | %s | | | | %s | %s | %g/%g | %s |" % (sys.argv[2], link, out.strip().replace("\n", " ")[:100], ratio, score, most, total))
PY
done
echo
for ((g = 1; g <= gradings; g++)); do
  echo "grading $g: $(grep -o 'graded in .*' "$work/g$g.log" || echo 'no summary')"
done
