#!/usr/bin/env bash
# tools/peers/compare_step.sh --model=tiny|base --batch_size=B --threads=T [--seq_len=128]
#   [--steps=N] [--dropout=0.1] [--line=2.11.0|1.13] [--bench=PATH]
# One training step (forward, loss, backward, clip, AdamW, zero_grad) of distlm's
# //part1:bench against HuggingFace transformers' BertForSequenceClassification with eager
# attention and with SDPA (tools/peers/hf_step_time.py), on the same torch (the wheel's LibTorch,
# tools/torch_wheel.sh), the same thread count and the same shapes, one after the other in one
# sitting. Prints each program's lines on stderr and one JSON line on stdout:
#   {"cpp_ms", "hf_eager_ms", "hf_sdpa_ms", "sgemm_gflops", "cpp_over_sdpa", "cpp_over_eager",
#    "cpp_fraction_of_sgemm", ...}
# Medians of --steps steps after a warm-up step. A benchmark: run it on an idle machine.
# --line=1.13: distlm on Debian's LibTorch 1.13 (the default build) against pytorch_transformers
# 1.2.0 on Debian's torch 1.13 (tools/peers/setup_legacy.sh; eager attention only, so
# hf_sdpa_ms is null and hf_eager_ms is the 2019 library's).
# --bench=PATH (or DISTLM_PEERS_BENCH=PATH): a //part1:bench already built (by a caller,
# or a Bazel test's data dependency); no `bazel build` then. It should be built on the line's
# LibTorch: "same_torch" in the JSON says whether its libtorch_cpu is the peer's (a warning on
# stderr when not: the comparison then runs, but is not like for like).
set -euo pipefail
shopt -s inherit_errexit  # a timer that fails inside $(...) stops the script
# The physical folder: called through a link (a Bazel test's runfiles), the checkout's.
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
cd "$here/../.."
model=tiny batch=32 threads=1 seq=128 steps=10 dropout=0.1 line=${DISTLM_PEERS_TORCH:-2.11.0}
bench=${DISTLM_PEERS_BENCH:-}
for arg in "$@"; do
  case "$arg" in
    --model=*) model=${arg#*=} ;;
    --batch_size=*) batch=${arg#*=} ;;
    --threads=*) threads=${arg#*=} ;;
    --seq_len=*) seq=${arg#*=} ;;
    --steps=*) steps=${arg#*=} ;;
    --dropout=*) dropout=${arg#*=} ;;
    --line=*) line=${arg#*=} ;;
    --bench=*) bench=${arg#*=} ;;
    *) echo "tools/peers/compare_step.sh: unknown flag '$arg' (see the top of the file)" >&2; exit 2 ;;
  esac
done
case "$model" in tiny|base) ;; *) echo "tools/peers/compare_step.sh: --model must be tiny or base, got '$model'" >&2; exit 2 ;; esac
if [ -n "$bench" ]; then
  [ -x "$bench" ] || { echo "tools/peers/compare_step.sh: --bench=$bench: no such executable" >&2; exit 2; }
  bench=$(cd "$(dirname "$bench")" && pwd)/$(basename "$bench")
fi

common=(--model="$model" --batch_size="$batch" --seq_len="$seq" --steps="$steps" --dropout="$dropout")
if [ "$line" = 1.13 ]; then
  python=$("$here/setup_legacy.sh" | tail -1)
  unset DISTLM_LIBTORCH
else
  # The peer's environment on the line's torch (setup.sh reads the version from here).
  python=$(DISTLM_PEERS_TORCH=$line "$here/setup.sh" | tail -1)
  if [ -z "$bench" ]; then
    DISTLM_LIBTORCH=$(tools/torch_wheel.sh "$line" | tail -1)
    export DISTLM_LIBTORCH
  fi
fi
if [ -z "$bench" ]; then
  bazel build //part1:bench >&2
  bench=$PWD/bazel-bin/part1/bench
fi
# shellcheck source=tools/peers/same_torch.sh
. "$here/same_torch.sh"
same=$(same_torch tools/peers/compare_step.sh "$bench" "$python" "build the bench on the line's LibTorch")
# Runs a timer, copies its lines to stderr, prints its last (JSON) line. (Not `tee /dev/stderr`:
# with stderr sent to a file, that reopens the file and writes over what is there.)
json_of() {
  local out status=0
  out=$("$@") || status=$?
  if [ "$status" -ne 0 ]; then
    printf '%s\n' "$out" >&2
    echo "tools/peers/compare_step.sh: $* failed (exit status $status)" >&2
    return "$status"
  fi
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

"$python" - "$cpp" "$eager" "$sdpa" "$same" <<'PY'
import json, sys
names = ("//part1:bench", "the eager timer", "the SDPA timer")
runs = []
for name, line in zip(names, sys.argv[1:4]):
    try:
        runs.append(json.loads(line))
    except ValueError:
        sys.exit(f"compare_step: {name}'s last line is not JSON: {line[:200]!r}")
cpp, eager, sdpa = runs


def field(d, name, *keys):
    """d's first key of keys present; a message naming what is there when none is."""
    for k in keys:
        if k in d:
            return d[k]
    sys.exit(f"compare_step: {name}'s JSON has no {' or '.join(keys)} (its keys: {', '.join(sorted(d))})")


# The bench says tokens_per_example (a ViT's patches + [CLS] are its tokens); it said seq_len once.
cpp_seq = field(cpp, names[0], "tokens_per_example", "seq_len")
for peer, name in ((eager, names[1]), (sdpa, names[2])):
    if peer and (peer["batch_size"], peer["seq_len"]) != (cpp["batch_size"], cpp_seq):
        sys.exit(f"compare_step: {name} ran batch {peer['batch_size']} x {peer['seq_len']}, "
                 f"the bench {cpp['batch_size']} x {cpp_seq}")
out = {
    "model": cpp["model"], "batch_size": cpp["batch_size"], "seq_len": cpp_seq,
    "threads": cpp["threads"], "torch": eager.get("torch"), "same_torch": sys.argv[4] == "true",
    "peer": eager["impl"] + " " + (eager.get("transformers") or eager.get("pytorch_transformers")),
    "cpp_ms": round(cpp["ms_per_step"], 2), "hf_eager_ms": round(eager["ms_per_step"], 2),
    "hf_sdpa_ms": round(sdpa["ms_per_step"], 2) if sdpa else None,
    "sgemm_gflops": round(field(cpp, names[0], "sgemm_gflops_per_s"), 1),
    "cpp_over_sdpa": round(cpp["ms_per_step"] / sdpa["ms_per_step"], 3) if sdpa else None,
    "cpp_over_eager": round(cpp["ms_per_step"] / eager["ms_per_step"], 3),
    "cpp_fraction_of_sgemm": round(field(cpp, names[0], "fraction_of_sgemm"), 3),
}
print(json.dumps(out))
PY
