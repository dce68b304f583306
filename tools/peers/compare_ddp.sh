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
world=2 model=tiny batch=8 threads=1 steps=20 seq=128 repeats=3 bin=${DISTLM_PEERS_BIN_DIR:-} model_dir=''
for arg in "$@"; do
  case "$arg" in
    --world_size=*) world=${arg#*=} ;;
    --model=*) model=${arg#*=} ;;
    --batch_size=*) batch=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --steps=*) steps=${arg#*=} ;;
    --seq_len=*) seq=${arg#*=} ;;
    --repeats=*) repeats=${arg#*=} ;;
    --bin_dir=*) bin=${arg#*=} ;;
    --model_dir=*) model_dir=${arg#*=} ;;
    *) echo "tools/peers/compare_ddp.sh: unknown flag '$arg' (see the top of the file)" >&2; exit 2 ;;
  esac
done
case "$model" in tiny|mid) ;; *) echo "tools/peers/compare_ddp.sh: --model must be tiny or mid, got '$model'" >&2; exit 2 ;; esac
# Task 3's figure is the median over steps 2..N: at least one step after the first.
if ! [[ "$steps" =~ ^[0-9]+$ && "$steps" -ge 2 && "$repeats" =~ ^[0-9]+$ && "$repeats" -ge 1 ]]; then
  echo "tools/peers/compare_ddp.sh: need --steps >= 2 (step 1 is excluded) and --repeats >= 1" >&2
  exit 2
fi
if [ -n "$bin" ]; then
  [ -d "$bin" ] || { echo "tools/peers/compare_ddp.sh: --bin_dir=$bin: no such folder" >&2; exit 2; }
  bin=$(cd "$bin" && pwd)
  for f in task3/reference tools/launch; do
    [ -x "$bin/$f" ] || { echo "tools/peers/compare_ddp.sh: --bin_dir: no $bin/$f" >&2; exit 2; }
  done
fi
if [ -n "$model_dir" ]; then
  [ -d "$model_dir" ] || { echo "tools/peers/compare_ddp.sh: --model_dir=$model_dir: no such folder" >&2; exit 2; }
  model_dir=$(cd "$model_dir" && pwd)
  for f in config.json data/train.tsv; do
    [ -f "$model_dir/$f" ] || { echo "tools/peers/compare_ddp.sh: --model_dir: no $model_dir/$f" >&2; exit 2; }
  done
fi

version=${DISTLM_PEERS_TORCH:-2.11.0}
python=$("$here/setup.sh" | tail -1)
if [ -z "$bin" ]; then
  DISTLM_LIBTORCH=$(tools/torch_wheel.sh "$version" | tail -1)
  export DISTLM_LIBTORCH
  bazel build //task3:reference //tools:launch >&2
  bin=$PWD/bazel-out/k8-opt/bin
fi
if [ -z "$model_dir" ]; then
  home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
  model_dir=${DISTLM_CACHE:-$home/.cache/distlm}/peers-out/models/$model
  [ -f "$model_dir/config.json" ] || "$python" "$here/make_checkpoint.py" "$model_dir" --preset="$model" >&2
fi
# The checkpoint must have the shape ddp_step_time.py builds for --model.
"$python" - "$model_dir/config.json" "$model" "$here" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[3])
from step_common import PRESETS, VOCAB
c, model = json.load(open(sys.argv[1])), sys.argv[2]
want = dict(zip(("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"), PRESETS[model]),
            vocab_size=VOCAB[model])
bad = {k: c.get(k) for k, v in want.items() if c.get(k) != v}
if bad:
    sys.exit(f"tools/peers/compare_ddp.sh: {sys.argv[1]} is not --model={model}'s shape: has {bad}, needs "
             + str({k: want[k] for k in bad}))
PY
# shellcheck source=tools/peers/same_torch.sh
. "$here/same_torch.sh"
same=$(same_torch tools/peers/compare_ddp.sh "$bin/task3/reference" "$python" "build task 3 on the wheel's LibTorch")
work=$(mktemp -d "${TMPDIR:-/tmp}/distlm_compare_ddp.XXXXXX")
trap 'rm -rf "$work"' EXIT

cpp_runs=() ddp_runs=()
for r in $(seq 1 "$repeats"); do
  # The model folder's data/train.tsv (RTE's 2490 training pairs): every rank's first batches
  # are full (the built-in 48-pair sample would give 4 ranks alternating batches of 8 and 4).
  "$bin/tools/launch" --nproc_per_node="$world" -- "$bin/task3/reference" --model_name_or_path="$model_dir" \
    --data_dir="$model_dir/data" \
    --max_steps="$steps" --per_gpu_train_batch_size="$batch" --max_seq_length="$seq" --pad_to_max_length=true \
    --do_eval=false --num_threads="$threads" --logging_steps=1000 --output_dir="$work/task3_$r" >&2
  cpp_runs+=("$(jq -s '[.[1:][] | .step_time_ms] | sort | .[length / 2 | floor]' "$work/task3_$r/train_log.jsonl")")
  # (Not `tee /dev/stderr`: with stderr sent to a file, that reopens it and writes over it.)
  status=0
  out=$("$python" "$here/ddp_step_time.py" --world_size="$world" --model="$model" --batch_size="$batch" \
    --seq_len="$seq" --steps="$steps" --threads="$threads") || status=$?
  printf '%s\n' "$out" >&2
  if [ "$status" -ne 0 ]; then
    echo "tools/peers/compare_ddp.sh: ddp_step_time.py failed (exit status $status)" >&2
    exit "$status"
  fi
  ddp=$(tail -1 <<<"$out")
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
