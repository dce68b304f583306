#!/usr/bin/env bash
# `./distlm run --output_dir=DIR` (the demo: common/testdata/rte_demo/demo.flags, with a flag of
# the user's on top, as tools/run_args.sh makes the arguments) learns: after its last epoch the
# dev accuracy and F1 are far above chance (0.5 and, for a model that always says entailment,
# 0), and the dev loss fell. The run's own eval_results.json is read.
set -euo pipefail
binary=$1
run_args=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mapfile -d '' args < <("$run_args" -0 common/testdata/rte_demo/demo.flags --output_dir="$out/run")
[ "${args[0]}" = --flagfile=common/testdata/rte_demo/demo.flags ] || {
  echo "NOT OK  a flag of the user's dropped the demo: ${args[*]}"; exit 1; }
"$binary" "${args[@]}" >"$out/log" 2>&1 || {
  echo "NOT OK  the demo run failed:"; tail -20 "$out/log"; exit 1; }
grep '^eval after' "$out/log"
python3 - "$out/run/eval_results.json" <<'PY'
import json, sys
evals = json.load(open(sys.argv[1]))
first, last = evals[0], evals[-1]
checks = [
    (len(evals) == 3, f"3 evaluations (got {len(evals)})"),
    (last["accuracy"] >= 0.85, f"last epoch's accuracy {last['accuracy']:.4f} >= 0.85"),
    (last["f1"] >= 0.85, f"last epoch's F1 {last['f1']:.4f} >= 0.85"),
    (last["loss"] < 0.8 * first["loss"], f"dev loss fell: {first['loss']:.4f} -> {last['loss']:.4f}"),
]
for ok, what in checks:
    print(("OK      " if ok else "NOT OK  ") + what)
sys.exit(0 if all(ok for ok, _ in checks) else 1)
PY
