#!/usr/bin/env bash
# tools/peers/compare_step.sh --model=tiny|base --batch_size=B --threads=T [--seq_len=128]
#   [--steps=N] [--dropout=0.1] [--line=2.11.0|1.13]
# One training step (forward, loss, backward, clip, AdamW, zero_grad) of distlm's
# //part1_single:bench against HuggingFace transformers' BertForSequenceClassification with eager
# attention and with SDPA (tools/peers/hf_step_time.py), on the same torch (the wheel's LibTorch,
# tools/torch_wheel.sh), the same thread count and the same shapes, one after the other in one
# sitting. Prints each program's lines on stderr and one JSON line on stdout:
#   {"cpp_ms", "hf_eager_ms", "hf_sdpa_ms", "sgemm_gflops", "cpp_over_sdpa", "cpp_over_eager",
#    "cpp_fraction_of_sgemm", ...}
# Medians of --steps steps after a warm-up step. A benchmark: run it on an idle machine.
# --line=1.13: distlm on Debian's LibTorch 1.13 (the default build) against pytorch_transformers
# 1.2.0 on Debian's torch 1.13 (tools/peers/setup_legacy.sh; eager attention only, so
# hf_sdpa_ms is null and hf_eager_ms is the 2019 library's).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
model=tiny batch=32 threads=1 seq=128 steps=10 dropout=0.1 line=${DISTLM_PEERS_TORCH:-2.11.0}
for arg in "$@"; do
  case "$arg" in
    --model=*) model=${arg#*=} ;;
    --batch_size=*) batch=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --seq_len=*) seq=${arg#*=} ;;
    --steps=*) steps=${arg#*=} ;;
    --dropout=*) dropout=${arg#*=} ;;
    --line=*) line=${arg#*=} ;;
    *) echo "tools/peers/compare_step.sh: unknown flag '$arg' (see the top of the file)" >&2; exit 2 ;;
  esac
done
case "$model" in tiny|base) ;; *) echo "tools/peers/compare_step.sh: --model must be tiny or base, got '$model'" >&2; exit 2 ;; esac

common=(--model="$model" --batch_size="$batch" --seq_len="$seq" --steps="$steps" --dropout="$dropout")
if [ "$line" = 1.13 ]; then
  python=$("$here/setup_legacy.sh" | tail -1)
  unset DISTLM_LIBTORCH
else
  python=$("$here/setup.sh" | tail -1)
  DISTLM_LIBTORCH=$(tools/torch_wheel.sh "$line" | tail -1)
  export DISTLM_LIBTORCH
fi
bazel build //part1_single:bench >&2
bench=bazel-bin/part1_single/bench
# Runs a timer, copies its lines to stderr, prints its last (JSON) line. (Not `tee /dev/stderr`:
# with stderr sent to a file, that reopens the file and writes over what is there.)
json_of() {
  local out
  out=$("$@")
  printf '%s\n' "$out" >&2
  tail -1 <<<"$out"
}

cpp=$(json_of "$bench" "${common[@]}" --num_threads="$threads")
if [ "$line" = 1.13 ]; then
  eager=$(json_of "$python" "$here/legacy_step_time.py" "${common[@]}" --threads="$threads")
  sdpa=null
else
  eager=$(json_of "$python" "$here/hf_step_time.py" "${common[@]}" --threads="$threads" --attn=eager)
  sdpa=$(json_of "$python" "$here/hf_step_time.py" "${common[@]}" --threads="$threads" --attn=sdpa)
fi

"$python" - "$cpp" "$eager" "$sdpa" <<'PY'
import json, sys
cpp, eager, sdpa = (json.loads(a) for a in sys.argv[1:4])
out = {
    "model": cpp["model"], "batch_size": cpp["batch_size"], "seq_len": cpp["seq_len"],
    "threads": cpp["threads"], "torch": eager.get("torch"),
    "peer": eager["impl"] + " " + (eager.get("transformers") or eager.get("pytorch_transformers")),
    "cpp_ms": round(cpp["ms_per_step"], 2), "hf_eager_ms": round(eager["ms_per_step"], 2),
    "hf_sdpa_ms": round(sdpa["ms_per_step"], 2) if sdpa else None,
    "sgemm_gflops": round(cpp["sgemm_gflops_per_s"], 1),
    "cpp_over_sdpa": round(cpp["ms_per_step"] / sdpa["ms_per_step"], 3) if sdpa else None,
    "cpp_over_eager": round(cpp["ms_per_step"] / eager["ms_per_step"], 3),
    "cpp_fraction_of_sgemm": round(cpp["fraction_of_sgemm"], 3),
}
print(json.dumps(out))
PY
