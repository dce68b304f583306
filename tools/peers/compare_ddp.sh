#!/usr/bin/env bash
# tools/peers/compare_ddp.sh --world_size=N --model=tiny|mid [--batch_size=8] [--threads=1]
#   [--steps=20] [--seq_len=128] [--repeats=3] [--bin_dir=DIR] [--model_dir=DIR]
# distlm's task 3 (its own DDP: bucketed all-reduce overlapped with backward) against PyTorch's
# DistributedDataParallel (tools/peers/ddp_step_time.py) on N local ranks over Gloo on
# 127.0.0.1: the same model shape (tools/peers/make_checkpoint.sh's presets, vocabulary 30522),
# batch per rank, sequence length (every row padded to it), dropout 0.1, threads per rank, and
# the same torch (the wheel's LibTorch). Median step time over steps 2..N for both (task 3: rank
# 0's step_time_ms in train_log.jsonl; PyTorch: each step's slowest rank); the two run
# alternately --repeats times and each side's figure is the median of its runs (this machine's
# speed drifts by 10-20 % within minutes). Prints each run's lines on stderr and one JSON line
# on stdout, with task 3's exposed communication (comm_exposed_ms) and compute. A benchmark:
# run it on an idle machine.
# --bin_dir=DIR (or DISTLM_PEERS_BIN_DIR=DIR): a folder with task3/reference and tools/launch
# already built (bazel-bin, or a Bazel test's runfiles); no `bazel build` then. They should be
# built on the wheel's LibTorch: "same_torch" in the JSON says whether task 3's libtorch_cpu is
# the peer's (a warning on stderr when not).
# --model_dir=DIR: the HuggingFace BERT folder task 3 starts from (with data/train.tsv), in the
# --model preset's shape with vocabulary 30522 (checked); default the cache's
# peers-out/models/MODEL, made by make_checkpoint.py from ../shared/reference when missing.
set -euo pipefail
shopt -s inherit_errexit  # a run that fails inside $(...) stops the script
# The physical folder: called through a link (a Bazel test's runfiles), the checkout's.
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
cd "$here/../.."
me=tools/peers/compare_ddp.sh
# shellcheck source=tools/peers/compare_common.sh
. "$here/compare_common.sh"
compare_defaults
for arg in "$@"; do
  compare_flag "$arg" || { echo "$me: unknown flag '$arg' (see the top of the file)" >&2; exit 2; }
done
compare_check task3/reference tools/launch
compare_setup task3/reference "task 3" //task3:reference //tools:launch

cpp_runs=() ddp_runs=()
for r in $(seq 1 "$repeats"); do
  cpp_runs+=("$(compare_run_stage task3/reference "$work/task3_$r")")
  ddp=$(compare_run_peer ddp_step_time.py)
  ddp_runs+=("$ddp")
  echo "compare_ddp: run $r: task 3 ${cpp_runs[-1]} ms" >&2
done
# task 3's parts (steps 2..N), from run 1.
parts=$(jq -s '.[1:] | {compute_ms: (map(.compute_time_ms) | add / length), comm_exposed_ms: (map(.comm_exposed_ms) | add / length), comm_busy_ms: (map(.comm_busy_ms) | add / length), buckets: .[0].buckets}' "$work/task3_1/train_log.jsonl")

"$python" - "$parts" "${cpp_runs[*]}" "$same" "${ddp_runs[@]}" <<'PY'
import json, statistics, sys
parts = json.loads(sys.argv[1])
cpp = [float(x) for x in sys.argv[2].split()]
try:
    ddp = [json.loads(x) for x in sys.argv[4:]]
except ValueError:
    sys.exit(f"compare_ddp: ddp_step_time.py's last line is not JSON: {sys.argv[4:]!r:.300}")
cpp_ms, ddp_ms = statistics.median(cpp), statistics.median(d["ms_per_step"] for d in ddp)
d = ddp[0]
print(json.dumps({
    "model": d["model"], "world_size": d["world_size"], "batch_size": d["batch_size"],
    "seq_len": d["seq_len"], "threads": d["threads"], "torch": d["torch"], "same_torch": sys.argv[3] == "true",
    "repeats": len(cpp),
    "task3_ms": round(cpp_ms, 2), "pytorch_ddp_ms": round(ddp_ms, 2),
    "task3_over_ddp": round(cpp_ms / ddp_ms, 3),
    "task3_runs_ms": [round(x, 1) for x in cpp], "ddp_runs_ms": [round(x["ms_per_step"], 1) for x in ddp],
    "task3_run1_parts_ms": {k: (round(v, 1) if isinstance(v, float) else v) for k, v in parts.items()}}))
PY
