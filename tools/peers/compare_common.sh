# shellcheck shell=bash disable=SC2034,SC2154
# (It sets and reads the sourcing script's variables.)
# Sourced by compare_ddp.sh and compare_fsdp.sh: the flags, checks and set-up they share (a
# distlm stage on tools/launch against a PyTorch peer on the same shapes), so the two cannot
# drift apart. The sourcing script sets `here` (its folder), `me` (its name, for messages) and
# `set -euo pipefail`, and runs from the checkout's root.

# compare_defaults: the shared flags' defaults (BIN_DIR from DISTLM_PEERS_BIN_DIR).
compare_defaults() {
  world=2 model=tiny batch=8 threads=1 steps=20 seq=128 repeats=3 bin=${DISTLM_PEERS_BIN_DIR:-} model_dir=''
}

# compare_flag ARG: takes one of the shared flags; returns 1 for any other.
compare_flag() {
  case "$1" in
    --world_size=*) world=${1#*=} ;;
    --model=*) model=${1#*=} ;;
    --batch_size=*) batch=${1#*=} ;;
    --threads=*) threads=${1#*=} ;;
    --steps=*) steps=${1#*=} ;;
    --seq_len=*) seq=${1#*=} ;;
    --repeats=*) repeats=${1#*=} ;;
    --bin_dir=*) bin=${1#*=} ;;
    --model_dir=*) model_dir=${1#*=} ;;
    *) return 1 ;;
  esac
}

# compare_check BINARY...: the shared flags' values; BINARY... (relative to --bin_dir) must be there.
compare_check() {
  case "$model" in tiny|mid) ;; *) echo "$me: --model must be tiny or mid, got '$model'" >&2; exit 2 ;; esac
  # The stage's figure is the median over steps 2..N: at least one step after the first.
  if ! [[ "$steps" =~ ^[0-9]+$ && "$steps" -ge 2 && "$repeats" =~ ^[0-9]+$ && "$repeats" -ge 1 ]]; then
    echo "$me: need --steps >= 2 (step 1 is excluded) and --repeats >= 1" >&2
    exit 2
  fi
  if [ -n "$bin" ]; then
    [ -d "$bin" ] || { echo "$me: --bin_dir=$bin: no such folder" >&2; exit 2; }
    bin=$(cd "$bin" && pwd)
    local f
    for f in "$@"; do
      [ -x "$bin/$f" ] || { echo "$me: --bin_dir: no $bin/$f" >&2; exit 2; }
    done
  fi
  if [ -n "$model_dir" ]; then
    [ -d "$model_dir" ] || { echo "$me: --model_dir=$model_dir: no such folder" >&2; exit 2; }
    model_dir=$(cd "$model_dir" && pwd)
    for f in config.json data/train.tsv; do
      [ -f "$model_dir/$f" ] || { echo "$me: --model_dir: no $model_dir/$f" >&2; exit 2; }
    done
  fi
}

# compare_setup STAGE_BINARY STAGE_NAME TARGET...: the peers' python; without --bin_dir, `bazel build
# TARGET...` on the wheel's LibTorch; the model folder (made when missing) and its shape; whether
# STAGE_BINARY loads the peer's torch. Sets python, bin, model_dir, same and work (removed at exit).
compare_setup() {
  local stage=$1 name=$2
  shift 2
  local version=${DISTLM_PEERS_TORCH:-2.11.0}
  python=$("$here/setup.sh" | tail -1)
  if [ -z "$bin" ]; then
    DISTLM_LIBTORCH=$(tools/torch_wheel.sh "$version" | tail -1)
    export DISTLM_LIBTORCH
    bazel build "$@" >&2
    bin=$PWD/bazel-out/k8-opt/bin
  fi
  if [ -z "$model_dir" ]; then
    local home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
    model_dir=${DISTLM_CACHE:-$home/.cache/distlm}/peers-out/models/$model
    [ -f "$model_dir/config.json" ] || "$python" "$here/make_checkpoint.py" "$model_dir" --preset="$model" >&2
  fi
  # The checkpoint must have the shape the peer's step timer builds for --model.
  "$python" - "$model_dir/config.json" "$model" "$here" "$me" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[3])
from step_common import PRESETS, VOCAB
c, model = json.load(open(sys.argv[1])), sys.argv[2]
want = dict(zip(("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"), PRESETS[model]),
            vocab_size=VOCAB[model])
bad = {k: c.get(k) for k, v in want.items() if c.get(k) != v}
if bad:
    sys.exit(f"{sys.argv[4]}: {sys.argv[1]} is not --model={model}'s shape: has {bad}, needs "
             + str({k: want[k] for k in bad}))
PY
  # shellcheck source=tools/peers/same_torch.sh
  . "$here/same_torch.sh"
  same=$(same_torch "$me" "$bin/$stage" "$python" "build $name on the wheel's LibTorch")
  work=$(mktemp -d "${TMPDIR:-/tmp}/distlm_$(basename "$me" .sh).XXXXXX")
  trap 'rm -rf "$work"' EXIT
}

# compare_run_stage STAGE_BINARY OUT_DIR FLAG...: the stage on --world_size ranks over tools/launch
# with the shared shapes, its log in OUT_DIR; prints the median step_time_ms of steps 2..N.
compare_run_stage() {
  local stage=$1 out=$2
  shift 2
  # The model folder's data/train.tsv (RTE's 2490 training pairs): every rank's first batches
  # are full (the built-in 48-pair sample would give 4 ranks alternating batches of 8 and 4).
  "$bin/tools/launch" --nproc_per_node="$world" -- "$bin/$stage" --model_name_or_path="$model_dir" \
    --data_dir="$model_dir/data" \
    --max_steps="$steps" --per_gpu_train_batch_size="$batch" --max_seq_length="$seq" --pad_to_max_length=true \
    --do_eval=false --num_threads="$threads" --logging_steps=1000 --output_dir="$out" "$@" >&2
  jq -s '[.[1:][] | .step_time_ms] | sort | .[length / 2 | floor]' "$out/train_log.jsonl"
}

# compare_run_peer PROGRAM FLAG...: the peer's step timer with the shared shapes; its lines on
# stderr, its last line (the JSON) on stdout; exits with its status if it fails.
compare_run_peer() {
  local program=$1 out status=0
  shift
  # (Not `tee /dev/stderr`: with stderr sent to a file, that reopens it and writes over it.)
  out=$("$python" "$here/$program" --world_size="$world" --model="$model" --batch_size="$batch" \
    --seq_len="$seq" --steps="$steps" --threads="$threads" "$@") || status=$?
  printf '%s\n' "$out" >&2
  if [ "$status" -ne 0 ]; then
    echo "$me: $program failed (exit status $status)" >&2
    exit "$status"
  fi
  tail -1 <<<"$out"
}
