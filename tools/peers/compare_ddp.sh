#!/usr/bin/env bash
# tools/peers/compare_ddp.sh --world_size=N --model=tiny|mid [--batch_size=8] [--threads=1]
#   [--steps=20] [--seq_len=128] [--repeats=3]
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
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
world=2 model=tiny batch=8 threads=1 steps=20 seq=128 repeats=3
for arg in "$@"; do
  case "$arg" in
    --world_size=*) world=${arg#*=} ;;
    --model=*) model=${arg#*=} ;;
    --batch_size=*) batch=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --steps=*) steps=${arg#*=} ;;
    --seq_len=*) seq=${arg#*=} ;;
    --repeats=*) repeats=${arg#*=} ;;
    *) echo "tools/peers/compare_ddp.sh: unknown flag '$arg' (see the top of the file)" >&2; exit 2 ;;
  esac
done
case "$model" in tiny|mid) ;; *) echo "tools/peers/compare_ddp.sh: --model must be tiny or mid, got '$model'" >&2; exit 2 ;; esac

version=${DISTLM_PEERS_TORCH:-2.11.0}
python=$("$here/setup.sh" | tail -1)
DISTLM_LIBTORCH=$(tools/torch_wheel.sh "$version" | tail -1)
export DISTLM_LIBTORCH
bazel build //task3:reference //tools:launch >&2
bin=bazel-out/k8-opt/bin
models=${DISTLM_CACHE:-$HOME/.cache/distlm}/peers-out/models
[ -f "$models/$model/config.json" ] || "$python" "$here/make_checkpoint.py" "$models/$model" --preset="$model" >&2
work=$(mktemp -d /tmp/distlm_compare_ddp.XXXXXX)
trap 'rm -rf "$work"' EXIT

cpp_runs=() ddp_runs=()
for r in $(seq 1 "$repeats"); do
  # The model folder's data/train.tsv (RTE's 2490 training pairs): every rank's first batches
  # are full (the built-in 48-pair sample would give 4 ranks alternating batches of 8 and 4).
  "$bin/tools/launch" --nproc_per_node="$world" -- "$bin/task3/reference" --model_name_or_path="$models/$model" \
    --data_dir="$models/$model/data" \
    --max_steps="$steps" --per_gpu_train_batch_size="$batch" --max_seq_length="$seq" --pad_to_max_length=true \
    --do_eval=false --num_threads="$threads" --logging_steps=1000 --output_dir="$work/task3_$r" >&2
  cpp_runs+=("$(jq -s '[.[1:][] | .step_time_ms] | sort | .[length / 2 | floor]' "$work/task3_$r/train_log.jsonl")")
  # (Not `tee /dev/stderr`: with stderr sent to a file, that reopens it and writes over it.)
  out=$("$python" "$here/ddp_step_time.py" --world_size="$world" --model="$model" --batch_size="$batch" \
    --seq_len="$seq" --steps="$steps" --threads="$threads")
  printf '%s\n' "$out" >&2
  ddp=$(tail -1 <<<"$out")
  ddp_runs+=("$ddp")
  echo "compare_ddp: run $r: task 3 ${cpp_runs[-1]} ms" >&2
done
# task 3's parts, from the run whose median is the median.
parts=$(jq -s '.[1:] | {compute_ms: (map(.compute_time_ms) | add / length), comm_exposed_ms: (map(.comm_exposed_ms) | add / length), comm_busy_ms: (map(.comm_busy_ms) | add / length), buckets: .[0].buckets}' "$work/task3_1/train_log.jsonl")

"$python" - "$parts" "${cpp_runs[*]}" "${ddp_runs[@]}" <<'PY'
import json, statistics, sys
parts = json.loads(sys.argv[1])
cpp = [float(x) for x in sys.argv[2].split()]
ddp = [json.loads(x) for x in sys.argv[3:]]
cpp_ms, ddp_ms = statistics.median(cpp), statistics.median(d["ms_per_step"] for d in ddp)
d = ddp[0]
print(json.dumps({
    "model": d["model"], "world_size": d["world_size"], "batch_size": d["batch_size"],
    "seq_len": d["seq_len"], "threads": d["threads"], "torch": d["torch"], "repeats": len(cpp),
    "task3_ms": round(cpp_ms, 2), "pytorch_ddp_ms": round(ddp_ms, 2),
    "task3_over_ddp": round(cpp_ms / ddp_ms, 3),
    "task3_runs_ms": [round(x, 1) for x in cpp], "ddp_runs_ms": [round(x["ms_per_step"], 1) for x in ddp],
    "task3_run1_parts_ms": {k: (round(v, 1) if isinstance(v, float) else v) for k, v in parts.items()}}))
PY
