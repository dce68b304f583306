#!/usr/bin/env bash
# The GPU check, run from a folder made by tools/gpu/bundle.sh on a machine with one or more
# NVIDIA GPUs and PyTorch 2.11.0+cu130 (no Bazel needed). About 2 minutes on one H100.
#
#   DIR/check.sh          # OUT=FOLDER (default /tmp/distlm_gpu_check) gets log.txt and runs.tgz
#
# 1. the unit tests with CUDA paths (device resolution, loss scaler, host staging, Gloo);
# 2. //part1_single:bench on BERT-base, batch 32 and 8, sequence 128: fp32, --fp16, --bf16;
# 3. one epoch of part 1 on cpu and cuda (fp32, --fp16, --bf16), task 5 and task 2b with two
#    ranks sharing cuda:0 over Gloo and one rank over NCCL, in fp32 and --fp16;
# 4. the per-update losses compared, OK / NOT OK with the worst difference and its bound;
# 5. two refusals (two NCCL ranks on one GPU; a GPU index past the last).
# Exit status: the number of NOT OK lines (0: all held).
set -u
G=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/distlm_gpu_check}
mkdir -p "$OUT"
TL=${TORCH_LIB:-$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))')}
export LD_LIBRARY_PATH="$G/lib:$TL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
B=$G/bin
W=$(mktemp -d /tmp/distlm_gpu_runs.XXXXXX)
exec > >(tee "$OUT/log.txt") 2>&1
step() { echo; echo "=== $* ($(date +%T))"; }
nvidia-smi -L 2>&1 | head -4

step unit tests
for t in common/runtime/device_test common/train/mixed_precision_test common/dist/host_staging_group_test \
         common/dist/gloo_process_group_test; do
  (cd "$B/$(dirname "$t")" && timeout 180 "$B/$t" >"$W/$(basename "$t").log" 2>&1)
  echo "$t: exit $? ($(grep -E '^\[  (PASSED|FAILED) ' "$W/$(basename "$t").log" | tr '\n' ' '))"
  grep -E "^this LibTorch|^\[  FAILED  \] [A-Z]" "$W/$(basename "$t").log"
done

step "bench: BERT-base, sequence 128 (median ms per update: forward, backward, clip+AdamW)"
for bs in 32 8; do
  for p in "" --fp16 --bf16; do
    timeout 180 "$B/part1_single/bench" --model=base --batch_size=$bs --seq_len=128 --steps=30 --device=cuda $p 2>&1 | tail -1
  done
done

if [ -f "$G/ref/model.safetensors" ]; then
  data=(--model_name_or_path="$G/ref" --data_dir="$G/ref/RTE")
  echo "data: the reference tiny BERT (hidden 64) on real RTE (2490 train pairs, 312 updates)"
else
  data=()
  echo "data: the built-in tiny BERT on the built-in 48 pairs (no ref/ in the bundle)"
fi
common=("${data[@]}" --num_train_epochs=1 --plots=false --logging_steps=100 --num_threads=4
        --dist_timeout_s=120)
run1() {  # name, flags...
  local name=$1; shift
  step "part 1: $name"
  timeout 300 "$B/part1_single/reference" "${common[@]}" --output_dir="$W/$name" "$@" 2>&1 | tail -4
}
runN() {  # name, ranks, stage, flags...
  local name=$1 n=$2 stage=$3; shift 3
  step "$stage, $n rank(s): $name"
  timeout 300 "$B/tools/launch" --nproc_per_node="$n" --timeout_s=280 -- "$B/$stage/reference" \
    "${common[@]}" --per_gpu_train_batch_size=$((8 / n)) --output_dir="$W/$name" "$@" 2>&1 |
    grep -vE "^\[rank [1-9]" | tail -4
}
run1 p1_cpu_fp32 --device=cpu
run1 p1_cuda_fp32 --device=cuda
run1 p1_cuda_fp16 --device=cuda --fp16
run1 p1_cuda_bf16 --device=cuda --bf16
runN t5_x2_gloo_fp32 2 task5 --device=cuda:0 --backend=gloo
runN t5_x2_gloo_fp16 2 task5 --device=cuda:0 --backend=gloo --fp16
runN t5_x1_nccl_fp16 1 task5 --device=cuda --backend=nccl --fp16
runN t2b_x2_gloo_fp32 2 task2b --device=cuda:0 --backend=gloo
runN t2b_x2_gloo_fp16 2 task2b --device=cuda:0 --backend=gloo --fp16
runN t2b_x1_nccl_fp16 1 task2b --device=cuda --backend=nccl --fp16

step "losses per update (bounds: fp32 1e-5; fp16 1e-3 and bf16 5e-3 against fp32; fp16 stages 1e-3 against part 1 fp16)"
python3 - "$W" <<'PY'
import json, os, sys
w = sys.argv[1]
def losses(name):
    path = os.path.join(w, name, "train_log.jsonl")
    if not os.path.exists(path):
        return None
    return [json.loads(line) for line in open(path)]
bad = 0
for a, b, bound in [("p1_cpu_fp32", "p1_cuda_fp32", 1e-5), ("p1_cuda_fp32", "t5_x2_gloo_fp32", 1e-5),
                    ("p1_cuda_fp32", "t2b_x2_gloo_fp32", 1e-5), ("p1_cuda_fp32", "p1_cuda_fp16", 1e-3),
                    ("p1_cuda_fp32", "p1_cuda_bf16", 5e-3), ("p1_cuda_fp16", "t5_x2_gloo_fp16", 1e-3),
                    ("p1_cuda_fp16", "t5_x1_nccl_fp16", 1e-3), ("p1_cuda_fp16", "t2b_x2_gloo_fp16", 1e-3),
                    ("p1_cuda_fp16", "t2b_x1_nccl_fp16", 1e-3)]:
    x, y = losses(a), losses(b)
    if not x or not y or len(x) != len(y):
        print(f"NOT OK {b} against {a}: a run is missing or has another number of updates")
        bad += 1
        continue
    diffs = [abs(p["loss"] - q["loss"]) for p, q in zip(x, y)]
    worst = max(range(len(diffs)), key=diffs.__getitem__)
    skipped = sum(1 for q in y if q.get("skipped"))
    ok = diffs[worst] <= bound
    bad += not ok
    print(f"{'OK' if ok else 'NOT OK':6} {b:17} against {a:13} {len(diffs)} updates, worst |loss diff| "
          f"{diffs[worst]:.2e} at update {worst + 1} (bound {bound:g})"
          + (f"; {skipped} update(s) skipped on overflow" if skipped else ""))
sys.exit(min(bad, 100))
PY
status=$?

step refusals
timeout 60 "$B/tools/launch" --nproc_per_node=2 --timeout_s=50 -- "$B/task2b/reference" "${common[@]}" \
  --max_steps=2 --output_dir="$W/refuse_nccl" --device=cuda --backend=nccl 2>&1 | grep "error:" | head -1
timeout 60 "$B/part1_single/reference" "${common[@]}" --max_steps=2 --output_dir="$W/refuse_dev" \
  --device=cuda:99 2>&1 | tail -1

(cd "$W" && tar czf "$OUT/runs.tgz" ./*/train_log.jsonl ./*/eval_results.json 2>/dev/null)
echo
echo "check.sh: $status NOT OK; logs in $OUT"
exit "$status"
