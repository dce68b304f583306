#!/usr/bin/env bash
# tools/peers/smoke_test.sh [--bench=PATH] [--bin_dir=DIR] [--keep]
# Every program in tools/peers at its smallest sizes, each checked for exit status 0 and for the
# outputs and JSON keys README.md promises (tools/peers/smoke_check.py): setup.sh, a tiny
# checkpoint (make_checkpoint.sh), hf_dump.sh on it, hf_tokenize.sh and hf_finetune.py on
# common/testdata, hf_vit_dump.py, compare_step.sh (hf_step_time.py eager and SDPA; --bf16 alone), the 1.13
# line (setup_legacy.sh, compare_step.sh --line=1.13, legacy_step_time.py), compare_ddp.sh
# (ddp_step_time.py, task 3 on 2 ranks) and compare_fsdp.sh (fsdp_step_time.py, task 6 on 2
# ranks, --fsdp=overlap and blocking). Prints OK / NOT OK / SKIPPED per program (with the last
# lines of its output when NOT OK) and a summary; exits 1 if any is NOT OK.
# Where the peers' environment cannot be made because PyPI cannot be reached, prints a loud
# SKIPPED and exits 0 (setup.sh failing while PyPI answers is NOT OK).
#
# `bazel test //tools/peers:smoke_test` runs it with the binaries as data dependencies:
#   --bench=PATH   //part1:bench, handed to compare_step.sh --bench
#   --bin_dir=DIR  a folder with task3/reference, task6/reference and tools/launch, for
#                  compare_ddp.sh and compare_fsdp.sh --bin_dir
# (a Bazel test cannot run `bazel build`). Called by hand without them, it builds the four with
# `bazel build` in the checkout (the caller's DISTLM_LIBTORCH, if any) and also runs
# compare_step.sh --line=1.13 without --bench: its own `bazel build` path, which a Bazel test
# cannot run. --keep leaves the work folder (named at the start) in place.
# The environments live in ${DISTLM_CACHE:-~/.cache/distlm} (the home from the password database
# where HOME is unset, as in a Bazel test); the first run makes them (PyPI; minutes).
set -uo pipefail
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
repo=$(cd "$here/../.." && pwd)
bench='' bin_dir='' keep=0
for arg in "$@"; do
  case "$arg" in
    --bench=*) bench=${arg#*=} ;;
    --bin_dir=*) bin_dir=${arg#*=} ;;
    --keep) keep=1 ;;
    *) echo "tools/peers/smoke_test.sh: unknown flag '$arg' (see the top of the file)" >&2; exit 2 ;;
  esac
done
[ -z "$bench" ] || bench=$(cd "$(dirname "$bench")" && pwd)/$(basename "$bench")
[ -z "$bin_dir" ] || bin_dir=$(cd "$bin_dir" && pwd)
in_bazel=0
[ -n "${TEST_SRCDIR:-}" ] && in_bazel=1

# The programs run from the checkout (links resolved): leave no __pycache__ there.
export PYTHONDONTWRITEBYTECODE=1
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
export DISTLM_CACHE=${DISTLM_CACHE:-$home/.cache/distlm}
work=$(mktemp -d "${TEST_TMPDIR:-${TMPDIR:-/tmp}}/peers_smoke.XXXXXX")
if [ "$keep" = 1 ]; then trap 'echo "smoke_test: outputs kept in $work"' EXIT; else trap 'rm -rf "$work"' EXIT; fi
start=$SECONDS
say() { echo "smoke_test: $*"; }
say "work folder $work; environments in $DISTLM_CACHE"

results=() failed=0
record() { results+=("$1"); say "$1"; }
# tail_of KEY: the last lines a program printed (stderr, then stdout).
tail_of() {
  echo "  --- last lines of its stderr ($work/$1.err):"
  tail -n 25 "$work/$1.err" 2>/dev/null | sed 's/^/  | /'
  echo "  --- last lines of its stdout:"
  tail -n 5 "$work/$1.out" 2>/dev/null | sed 's/^/  | /'
}
not_ok() { record "NOT OK  $2"; failed=1; [ -z "$1" ] || tail_of "$1"; }

# run KEY LIMIT CMD...: CMD with stdout in KEY.out and stderr in KEY.err, killed (with its
# process group: spawned ranks too) after LIMIT seconds; sets rc and secs.
run() {
  local key=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout -k 10 "$limit" "$@" >"$work/$key.out" 2>"$work/$key.err" </dev/null
  rc=$?
  secs=$((SECONDS - t0))
  return "$rc"
}
why_failed() {
  case "$rc" in
    124 | 137) echo "timed out after $secs s" ;;
    *) echo "exit status $rc after $secs s" ;;
  esac
}
# step KEY LABEL LIMIT CHECK... -- CMD...: runs CMD, then smoke_check.py CHECK... (if any).
step() {
  local key=$1 label=$2 limit=$3
  shift 3
  local check=()
  while [ "$1" != "--" ]; do check+=("$1"); shift; done
  shift
  if ! run "$key" "$limit" "$@"; then
    not_ok "$key" "$label: $(why_failed)"
    return 1
  fi
  local why
  if [ ${#check[@]} -gt 0 ] && ! why=$("$python" "$here/smoke_check.py" "${check[@]}" 2>&1); then
    not_ok "$key" "$label ($secs s): $why"
    return 1
  fi
  record "OK      $label ($secs s)"
}
summary() {
  echo
  say "summary ($((SECONDS - start)) s):"
  printf '  %s\n' "${results[@]}"
}

# Whether pip can reach its index (PyPI, or PIP_INDEX_URL): what tells "no network" from a bug.
pypi_reachable() {
  local py
  for py in python3 /usr/bin/python3; do
    if "$py" -m pip --version >/dev/null 2>&1; then
      timeout 120 "$py" -m pip index versions transformers --retries 0 --timeout 20 >/dev/null 2>&1
      return
    fi
  done
  timeout 60 python3 -c 'import os, urllib.request
urllib.request.urlopen(os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/") + "/transformers/", timeout=30)' \
    >/dev/null 2>&1
}

# 1. The environment. Everything else needs it.
python=python3
if ! run setup 1500 "$here/setup.sh"; then
  if pypi_reachable; then
    not_ok setup "setup.sh: $(why_failed), and PyPI answers: a broken setup, not a missing network"
    summary
    exit 1
  fi
  tail_of setup
  say "********************************************************************************"
  say "SKIPPED: tools/peers/setup.sh could not make the peers' environment in"
  say "SKIPPED: $DISTLM_CACHE and PyPI cannot be reached (pip index versions transformers"
  say "SKIPPED: failed): no program in tools/peers was run. Rerun with network access."
  say "********************************************************************************"
  exit 0
fi
python=$(tail -1 "$work/setup.out")
# setup.sh's pins, read from it: TORCH=${DISTLM_PEERS_TORCH:-2.11.0}, TRANSFORMERS=5.24.0, ...
pin() { sed -n "s/^$1=//p" "$here/setup.sh"; }
torch_version=${DISTLM_PEERS_TORCH:-$(pin TORCH | sed 's/.*:-\([0-9.]*\)}$/\1/')}
if why=$("$python" "$here/smoke_check.py" setup "$DISTLM_CACHE" "$torch_version" \
  "$(pin TRANSFORMERS)" "$(pin TOKENIZERS)" "$(pin SAFETENSORS)" 2>&1); then
  record "OK      setup.sh ($secs s): $python"
else
  not_ok setup "setup.sh ($secs s): $why"
fi

# 2. The binaries: handed in by the Bazel test, else built here.
if [ -z "$bench" ] || [ -z "$bin_dir" ]; then
  if [ "$in_bazel" = 1 ]; then
    not_ok "" "smoke_test.sh: inside a Bazel test --bench and --bin_dir are needed (tools/peers/BUILD passes them)"
    summary
    exit 1
  fi
  if ! run bazel_build 3600 bash -c "cd '$repo' && bazel build //part1:bench //task3:reference //task6:reference //tools:launch"; then
    not_ok bazel_build "bazel build //part1:bench //task3:reference //task6:reference //tools:launch: $(why_failed)"
    summary
    exit 1
  fi
  record "OK      bazel build //part1:bench //task3:reference //task6:reference //tools:launch ($secs s, with Bazel's wait for the server)"
  bench=${bench:-$repo/bazel-bin/part1/bench}
  bin_dir=${bin_dir:-$repo/bazel-bin}
fi

# 3. A tiny checkpoint on the project's own data, with the vocabulary padded to 30522 entries
# (unused tokens) so that it has the shape bench.cc and ddp_step_time.py build for --model=tiny.
data=$repo/common/testdata
awk -v n=30522 '{ print } END { for (i = NR; i < n; i++) print "[unused" i - NR "]" }' "$data/vocab.txt" >"$work/vocab.txt"
ckpt=$work/tiny
have_ckpt=0
step make_checkpoint "make_checkpoint.sh --preset=tiny" 300 checkpoint "$ckpt" 30522 -- \
  "$here/make_checkpoint.sh" "$ckpt" --preset=tiny --vocab="$work/vocab.txt" --train_tsv="$data/rte/train.tsv" &&
  have_ckpt=1

needs_ckpt() { [ "$have_ckpt" = 1 ] || { not_ok "" "$1: not run (make_checkpoint.sh failed)"; return 1; }; }

# 4. The dumps and the tokenizer.
needs_ckpt "hf_dump.sh" &&
  step hf_dump "hf_dump.sh (2 steps, batch 2, max_seq_length 16)" 300 dump "$work/dump" 2 2 16 -- \
    "$here/hf_dump.sh" "$ckpt" "$work/dump" --steps=2 --batch_size=2 --max_seq_length=16
step hf_tokenize "hf_tokenize.sh (common/testdata: 64 pairs)" 300 tokenize "$work/tokenizer" 64 -- \
  "$here/hf_tokenize.sh" "$data/vocab.txt" "$data/rte" "$work/tokenizer"
step hf_vit_dump "hf_vit_dump.py" 300 vit "$work/vit" -- "$python" "$here/hf_vit_dump.py" "$work/vit"

# 5. Fine-tuning: a head drawn for both sides, then 2 updates on common/testdata's RTE sample.
if needs_ckpt "hf_finetune.py --init_out" &&
  step hf_finetune_init "hf_finetune.py --init_out" 300 finetune_init "$work/init" -- \
    "$python" "$here/hf_finetune.py" --model="$ckpt" --init_out="$work/init"; then
  step hf_finetune "hf_finetune.py --max_steps=2 (batch 2, max_seq_length 16)" 300 finetune "$work/finetune" 2 -- \
    "$python" "$here/hf_finetune.py" --model="$work/init" --data_dir="$data/rte" --out="$work/finetune" \
    --max_steps=2 --batch=2 --max_seq_length=16 --dropout=0
fi

# 6. One step against the bench: transformers eager and SDPA on the wheel's torch.
small=(--model=tiny --batch_size=2 --seq_len=16 --steps=1 --threads=1)
if step compare_step "compare_step.sh --bench (hf_step_time.py eager and SDPA)" 300 compare_step "$work/compare_step.out" "$torch_version" 2 16 -- \
  "$here/compare_step.sh" "${small[@]}" --bench="$bench"; then
  grep -h 'WARNING' "$work/compare_step.err" | sed 's/^/  note: /'
fi
# hf_step_time.py under bf16 autocast (on a GPU: --device=cuda --bf16, docs/gpu.md's table).
step step_time_bf16 "hf_step_time.py --bf16" 300 step_time "$work/step_time_bf16.out" bf16 -- \
  "$python" "$here/hf_step_time.py" "${small[@]}" --bf16

# 7. The 1.13 line: pytorch_transformers 1.2.0 on Debian's torch (setup_legacy.sh apt-gets
# python3-torch when it is missing: as root, or through sudo without a password).
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null && [ "$(id -u)" -ne 0 ] && ! sudo -n true 2>/dev/null; then
  record "SKIPPED setup_legacy.sh and the 1.13 line: Debian's python3-torch is not installed, and installing it needs a password (run tools/peers/setup_legacy.sh once)"
elif run setup_legacy 900 "$here/setup_legacy.sh"; then
  record "OK      setup_legacy.sh ($secs s): $(tail -1 "$work/setup_legacy.out")"
  step compare_step_113 "compare_step.sh --line=1.13 --bench (legacy_step_time.py)" 300 compare_step "$work/compare_step_113.out" 1.13 2 16 -- \
    "$here/compare_step.sh" --line=1.13 "${small[@]}" --bench="$bench" &&
    grep -h 'WARNING' "$work/compare_step_113.err" | sed 's/^/  note: /'
  if [ "$in_bazel" = 0 ]; then
    if [ -z "${DISTLM_LIBTORCH:-}" ]; then
      step compare_step_build "compare_step.sh --line=1.13 (its own bazel build)" 3600 compare_step "$work/compare_step_build.out" 1.13 2 16 -- \
        "$here/compare_step.sh" --line=1.13 "${small[@]}"
    else
      record "SKIPPED compare_step.sh --line=1.13 without --bench: DISTLM_LIBTORCH is set, and its bazel build would switch the checkout to Debian's LibTorch"
    fi
  fi
elif pypi_reachable; then
  not_ok setup_legacy "setup_legacy.sh: $(why_failed), and PyPI answers (apt, or the install itself?)"
else
  tail_of setup_legacy
  record "SKIPPED setup_legacy.sh and the 1.13 line (compare_step.sh --line=1.13, legacy_step_time.py): PyPI cannot be reached"
fi

# 8. DDP: task 3 and PyTorch DDP on 2 ranks, 2 steps (step 1 is excluded from the medians).
needs_ckpt "compare_ddp.sh" &&
  step compare_ddp "compare_ddp.sh --world_size=2 --bin_dir --model_dir (ddp_step_time.py)" 600 compare_ddp "$work/compare_ddp.out" 2 2 16 -- \
    "$here/compare_ddp.sh" --world_size=2 --model=tiny --batch_size=2 --seq_len=16 --steps=2 --repeats=1 --threads=1 \
    --bin_dir="$bin_dir" --model_dir="$ckpt" &&
  grep -h 'WARNING' "$work/compare_ddp.err" | sed 's/^/  note: /'

# 8b. FSDP: task 6 (--fsdp=overlap, and --blocking's --fsdp=blocking) and PyTorch's FSDP2 on 2
# ranks, 2 steps.
needs_ckpt "compare_fsdp.sh" &&
  step compare_fsdp "compare_fsdp.sh --world_size=2 --blocking --bin_dir --model_dir (fsdp_step_time.py)" 600 compare_fsdp "$work/compare_fsdp.out" 2 2 16 -- \
    "$here/compare_fsdp.sh" --world_size=2 --model=tiny --batch_size=2 --seq_len=16 --steps=2 --repeats=1 --threads=1 \
    --blocking --bin_dir="$bin_dir" --model_dir="$ckpt" &&
  grep -h 'WARNING' "$work/compare_fsdp.err" | sed 's/^/  note: /'

# 8c. Task 7's peers: PyTorch's tensor parallel (DTensor, Megatron's plan) and pipelining (1F1B)
# on 2 ranks, and 2 x 2 (data x tensor, data x pipeline) on 4, 1 step each (the cost table's program:
# docs/design/task7_costs.md).
mp_small=(--world_size=2 --model=tiny --batch_size=4 --seq_len=16 --steps=1 --threads=1)
step model_parallel_tensor "model_parallel_step_time.py --layout=tensor --profile_out" 300 model_parallel \
  "$work/model_parallel_tensor.out" pytorch_tensor_parallel tensor 2 4 16 -- "$python" "$here/model_parallel_step_time.py" \
  --layout=tensor "${mp_small[@]}" --profile_out="$work/model_parallel_tensor.profile" &&
  if ! grep -q 'aten::mm' "$work/model_parallel_tensor.profile" 2>/dev/null; then
    not_ok model_parallel_tensor "model_parallel_step_time.py --profile_out wrote no operator table (no aten::mm in it)"
  fi
step model_parallel_2x2 "model_parallel_step_time.py --layout=tensor --tensor_parallel_size=2" 300 model_parallel \
  "$work/model_parallel_2x2.out" pytorch_tensor_parallel tensor 4 4 16 -- "$python" "$here/model_parallel_step_time.py" \
  --layout=tensor "${mp_small[@]}" --world_size=4 --tensor_parallel_size=2
step model_parallel_1f1b "model_parallel_step_time.py --layout=1f1b" 300 model_parallel "$work/model_parallel_1f1b.out" \
  pytorch_pipelining 1f1b 2 4 16 -- "$python" "$here/model_parallel_step_time.py" --layout=1f1b --micro_batches=2 "${mp_small[@]}"
step model_parallel_2x2_pipeline "model_parallel_step_time.py --layout=1f1b --pipeline_parallel_size=2" 300 model_parallel \
  "$work/model_parallel_2x2_pipeline.out" pytorch_pipelining 1f1b 4 4 16 -- "$python" "$here/model_parallel_step_time.py" \
  --layout=1f1b --micro_batches=2 "${mp_small[@]}" --world_size=4 --pipeline_parallel_size=2

# 9. make_dumps.sh runs the programs above at their real sizes (../shared's data, a BERT-base
# dump: minutes; .ci/run runs it). Here only that it starts and refuses a missing reference folder.
run make_dumps 60 env DISTLM_SHARED_DIR="$work/no_shared" "$here/make_dumps.sh" "$work/dumps_root"
if [ "$rc" = 2 ] && grep -q 'no reference data' "$work/make_dumps.err"; then
  record "OK      make_dumps.sh: its argument check only (a missing reference folder: exit 2, said so); its parts run above"
else
  not_ok make_dumps "make_dumps.sh with no reference folder: $(why_failed), expected exit status 2 and 'no reference data'"
fi

summary
if [ "$failed" = 0 ]; then say "PASSED"; else say "FAILED"; fi
exit "$failed"
