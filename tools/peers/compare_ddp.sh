#!/usr/bin/env bash
# tools/peers/compare_ddp.sh --world_size=N --model=tiny|mid [--batch_size=8] [--threads=1]
#   [--steps=20] [--seq_len=128]
# distlm's task 3 (its own DDP: bucketed all-reduce overlapped with backward) against PyTorch's
# DistributedDataParallel (tools/peers/ddp_step_time.py) on N local ranks over Gloo on
# 127.0.0.1: the same model shape (tools/peers/make_checkpoint.sh's presets, vocabulary 30522),
# batch per rank, sequence length (every row padded to it), dropout 0.1, threads per rank, and
# the same torch (the wheel's LibTorch). Median step time over steps 2..N for both (task 3: rank
# 0's step_time_ms in train_log.jsonl; PyTorch: each step's slowest rank). Prints each run's
# lines on stderr and one JSON line on stdout. A benchmark: run it on an idle machine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
world=2 model=tiny batch=8 threads=1 steps=20 seq=128
for arg in "$@"; do
  case "$arg" in
    --world_size=*) world=${arg#*=} ;;
    --model=*) model=${arg#*=} ;;
    --batch_size=*) batch=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --steps=*) steps=${arg#*=} ;;
    --seq_len=*) seq=${arg#*=} ;;
    *) echo "tools/peers/compare_ddp.sh: unknown flag '$arg' (see the top of the file)" >&2; exit 2 ;;
  esac
done
case "$model" in tiny|mid) ;; *) echo "tools/peers/compare_ddp.sh: --model must be tiny or mid, got '$model'" >&2; exit 2 ;; esac

version=${DISTLM_PEERS_TORCH:-2.11.0}
python=$("$here/setup.sh" | tail -1)
DISTLM_LIBTORCH=$(tools/torch_wheel.sh "$version" | tail -1)
export DISTLM_LIBTORCH
bazel build //task3:reference //tools:launch 2>&1 | grep -v 'linux-sandbox' >&2
bin=bazel-out/k8-opt/bin
models=${DISTLM_CACHE:-$HOME/.cache/distlm}/peers-out/models
[ -f "$models/$model/config.json" ] || "$python" "$here/make_checkpoint.py" "$models/$model" --preset="$model" >&2
work=$(mktemp -d /tmp/distlm_compare_ddp.XXXXXX)
trap 'rm -rf "$work"' EXIT

"$bin/tools/launch" --nproc_per_node="$world" -- "$bin/task3/reference" --model_name_or_path="$models/$model" \
  --max_steps="$steps" --per_gpu_train_batch_size="$batch" --max_seq_length="$seq" --pad_to_max_length=true \
  --do_eval=false --num_threads="$threads" --logging_steps=1000 --output_dir="$work/task3" >&2
cpp_ms=$(jq -s '[.[] | select(.step_time_ms != null) | .step_time_ms] | .[1:] | sort | .[length / 2 | floor]' "$work/task3/train_log.jsonl")
ddp=$("$python" "$here/ddp_step_time.py" --world_size="$world" --model="$model" --batch_size="$batch" \
  --seq_len="$seq" --steps="$steps" --threads="$threads" | tee /dev/stderr | tail -1)

"$python" - "$cpp_ms" "$ddp" <<'PY'
import json, sys
cpp_ms, ddp = float(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({
    "model": ddp["model"], "world_size": ddp["world_size"], "batch_size": ddp["batch_size"],
    "seq_len": ddp["seq_len"], "threads": ddp["threads"], "torch": ddp["torch"],
    "task3_ms": round(cpp_ms, 2), "pytorch_ddp_ms": round(ddp["ms_per_step"], 2),
    "task3_over_ddp": round(cpp_ms / ddp["ms_per_step"], 3)}))
PY
