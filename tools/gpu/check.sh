#!/usr/bin/env bash
# The GPU check, run from a folder made by tools/gpu/bundle.sh on a machine with one or more
# NVIDIA GPUs and PyTorch 2.11.0+cu130 (no Bazel needed). About 2 minutes on one H100.
#
#   DIR/check.sh          # OUT=FOLDER (default /tmp/distlm_gpu_check) gets log.txt and runs.tgz
#
# 1. the unit tests with CUDA paths (device resolution, loss scaler, host staging, Gloo);
# 2. //part1:bench on BERT-base, batch 32 and 8, sequence 128: fp32, --fp16, --bf16; at batch 32
#    in bf16 each AdamW formula with the fused and the _foreach_ kernels, and transformers' update;
# 3. one epoch of part 1 on cpu and cuda (fp32, --fp16, --bf16), tasks 5, 6 and 2b with two
#    ranks sharing cuda:0 over Gloo and one rank over NCCL, in fp32 and --fp16 (task 3: two ranks
#    over Gloo, fp32); task 7 on two ranks sharing cuda:0 over Gloo (its all-reduces and
#    send/recv staged through the host): 7a's split with dropout 0.1 in fp32 and --fp16 against
#    part 1 with the same dropout, and 7b's 1F1B pipeline over 4 micro-batches against part 1
#    without dropout (one GPU cannot hold two NCCL ranks);
# 4. the per-update losses compared, OK / NOT OK with the worst difference and its bound;
# 5. three refusals (two NCCL ranks on one GPU; a GPU index past the last; one rank on cuda:0
#    beside one on the CPU);
# 6. BERT-base (random weights, written by tools/peers/make_checkpoint.py with the machine's
#    transformers) at global batch 32, --bf16: part 1, tasks 3, 5 and 6 on one rank (NCCL) and
#    two ranks sharing cuda:0 (Gloo): mean iteration time and the GPU memory of rank 0 (the
#    caching allocator's allocated bytes: held at the end of an update, and the update's peak).
# Exit status: the number of NOT OK lines (0: all held). SKIP="units bench parity base" leaves out
# steps 1, 2, 3-4, 6.
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

SKIP=${SKIP:-}
skipped() { [[ " $SKIP " == *" $1 "* ]]; }

skipped units || step unit tests
skipped units ||
for t in common/runtime/device_test common/train/mixed_precision_test common/dist/host_staging_group_test \
         common/dist/gloo_process_group_test; do
  (cd "$B/$(dirname "$t")" && timeout 180 "$B/$t" >"$W/$(basename "$t").log" 2>&1)
  echo "$t: exit $? ($(grep -E '^\[  (PASSED|FAILED) ' "$W/$(basename "$t").log" | tr '\n' ' '))"
  grep -E "^this LibTorch|^\[  FAILED  \] [A-Z]" "$W/$(basename "$t").log"
done

if ! skipped bench; then
step "bench: BERT-base, sequence 128 (median ms per update: forward, backward, clip+AdamW)"
for bs in 32 8; do
  for p in "" --fp16 --bf16; do
    timeout 180 "$B/part1/bench" --model=base --batch_size=$bs --seq_len=128 --steps=30 --device=cuda $p 2>&1 | tail -1
  done
done
step "the update's optimizer, one sitting: BERT-base, batch 32, --bf16, each formula with each kernel; transformers"
for o in "bert_adamw fused" "bert_adamw foreach" "adamw_torch fused" "adamw_torch foreach"; do
  set -- $o
  echo "--optim=$1 --adamw_kernel=$2: $(timeout 180 "$B/part1/bench" --model=base --batch_size=32 --seq_len=128 \
    --steps=30 --device=cuda --bf16 --optim=$1 --adamw_kernel=$2 2>&1 | tail -1)"
done
if python3 -c "import transformers" 2>/dev/null; then
  for a in sdpa eager; do
    echo "transformers, fused AdamW, $a attention: $(timeout 180 python3 "$G/peers/hf_step_time.py" --model=base \
      --batch_size=32 --seq_len=128 --steps=30 --device=cuda --bf16 --optim=fused --attn=$a 2>&1 | tail -1)"
  done
else
  echo "transformers is not installed here: its update was not timed"
fi
fi

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
  timeout 300 "$B/part1/reference" "${common[@]}" --output_dir="$W/$name" "$@" 2>&1 | tail -4
}
runN() {  # name, ranks, stage, flags...
  local name=$1 n=$2 stage=$3; shift 3
  step "$stage, $n rank(s): $name"
  timeout 300 "$B/tools/launch" --nproc_per_node="$n" --timeout_s=280 -- "$B/$stage/reference" \
    "${common[@]}" --per_gpu_train_batch_size=$((8 / n)) --output_dir="$W/$name" "$@" 2>&1 |
    grep -vE "^\[rank [1-9]" | tail -4
}
if ! skipped parity; then
run1 p1_cpu_fp32 --device=cpu
run1 p1_cuda_fp32 --device=cuda
run1 p1_cuda_fp16 --device=cuda --fp16
run1 p1_cuda_bf16 --device=cuda --bf16
runN t5_x2_gloo_fp32 2 task5 --device=cuda:0 --backend=gloo
runN t5_x2_gloo_fp16 2 task5 --device=cuda:0 --backend=gloo --fp16
runN t5_x1_nccl_fp16 1 task5 --device=cuda --backend=nccl --fp16
runN t6_x2_gloo_fp32 2 task6 --device=cuda:0 --backend=gloo
runN t6_x2_gloo_fp16 2 task6 --device=cuda:0 --backend=gloo --fp16
runN t6_x1_nccl_fp32 1 task6 --device=cuda --backend=nccl
runN t6_x1_nccl_fp16 1 task6 --device=cuda --backend=nccl --fp16
runN t3_x2_gloo_fp32 2 task3 --device=cuda:0 --backend=gloo
runN t2b_x2_gloo_fp32 2 task2b --device=cuda:0 --backend=gloo
runN t2b_x2_gloo_fp16 2 task2b --device=cuda:0 --backend=gloo --fp16
runN t2b_x1_nccl_fp16 1 task2b --device=cuda --backend=nccl --fp16
# Task 7's ranks share one replica: each reads the whole batch of 8. The split runs with
# dropout 0.1 (the checkpoint has none): each rank keeps its heads of LibTorch's whole mask.
drop=(--hidden_dropout_prob=0.1 --attention_probs_dropout_prob=0.1)
run1 p1_cuda_fp32_drop --device=cuda "${drop[@]}"
run1 p1_cuda_fp16_drop --device=cuda --fp16 "${drop[@]}"
runN t7_x2_tensor_gloo 2 task7 --device=cuda:0 --backend=gloo --per_gpu_train_batch_size=8 "${drop[@]}"
runN t7_x2_tensor_gloo_fp16 2 task7 --device=cuda:0 --backend=gloo --per_gpu_train_batch_size=8 --fp16 "${drop[@]}"
run1 p1_cuda_fp32_nodrop --device=cuda --hidden_dropout_prob=0 --attention_probs_dropout_prob=0
runN t7_x2_pipeline_gloo 2 task7 --device=cuda:0 --backend=gloo --per_gpu_train_batch_size=8 \
  --model_parallel=pipeline --micro_batches=4 --hidden_dropout_prob=0 --attention_probs_dropout_prob=0

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
                    ("p1_cuda_fp16", "t2b_x1_nccl_fp16", 1e-3), ("p1_cuda_fp32", "t6_x2_gloo_fp32", 1e-5),
                    ("p1_cuda_fp32", "t6_x1_nccl_fp32", 1e-5), ("p1_cuda_fp16", "t6_x2_gloo_fp16", 1e-3),
                    ("p1_cuda_fp16", "t6_x1_nccl_fp16", 1e-3), ("p1_cuda_fp32", "t3_x2_gloo_fp32", 1e-5),
                    ("p1_cuda_fp32_drop", "t7_x2_tensor_gloo", 1e-5),
                    ("p1_cuda_fp16_drop", "t7_x2_tensor_gloo_fp16", 1e-3), ("p1_cuda_fp32_nodrop", "t7_x2_pipeline_gloo", 1e-5)]:
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
    print(f"{'OK' if ok else 'NOT OK':6} {b:22} against {a:19} {len(diffs)} updates, worst |loss diff| "
          f"{diffs[worst]:.2e} at update {worst + 1} (bound {bound:g})"
          + (f"; {skipped} update(s) skipped on overflow" if skipped else ""))
sys.exit(min(bad, 100))
PY
status=$?
fi
status=${status:-0}

step refusals
timeout 60 "$B/tools/launch" --nproc_per_node=2 --timeout_s=50 -- "$B/task2b/reference" "${common[@]}" \
  --max_steps=2 --output_dir="$W/refuse_nccl" --device=cuda --backend=nccl 2>&1 | grep "error:" | head -1
timeout 60 "$B/part1/reference" "${common[@]}" --max_steps=2 --output_dir="$W/refuse_dev" \
  --device=cuda:99 2>&1 | tail -1
port=$((29000 + RANDOM % 1000))
pids=()
for r in 0 1; do
  dev=cuda:0; [ "$r" = 1 ] && dev=cpu
  timeout 30 "$B/task2b/reference" "${common[@]}" --max_steps=2 --output_dir="$W/refuse_mixed$r" --device=$dev \
    --backend=gloo --master_ip=127.0.0.1 --master_port=$port --world_size=2 --local_rank=$r >"$W/mixed$r.log" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"  # not a bare wait: that also waits for the log's tee
grep -h "error:" "$W"/mixed[01].log | head -2

if ! skipped base; then
  step "BERT-base, random weights, global batch 32, --bf16: iteration time and GPU memory of rank 0"
  base=$W/bert_base
  python3 "$G/peers/make_checkpoint.py" "$base" --preset=base --vocab="$G/ref/vocab.txt" \
    --train_tsv="$G/ref/RTE/train.tsv" 2>&1 | tail -1
  for run in ${BASE_RUNS:-"part1:1:- task6:1:nccl task6:2:gloo task3:2:gloo task5:2:gloo task3:1:nccl task5:1:nccl"}; do
    run=${run//:/ }
    set -- $run
    dev=cuda; [ "$3" = gloo ] && dev=cuda:0
    d=$W/base_$1_x$2
    flags=(--model_name_or_path="$base" --data_dir="$G/ref/RTE" --do_eval=false --plots=false --bf16
           --max_steps=12 --logging_steps=100 --per_gpu_train_batch_size=$((32 / $2)) --device=$dev
           --num_threads=4 --output_dir="$d")
    if [ "$1" = part1 ]; then
      timeout 240 "$B/$1/reference" "${flags[@]}" >"$d.log" 2>&1
    else
      timeout 240 "$B/tools/launch" --nproc_per_node="$2" --timeout_s=230 -- "$B/$1/reference" "${flags[@]}" \
        --backend=$3 --dist_timeout_s=200 >"$d.log" 2>&1
    fi
    rc=$?
    python3 - "$1" "$2" "$3" "$rc" "$d" <<'PY'
import json, os, sys
stage, n, backend, rc, d = sys.argv[1:]
log = open(d + ".log").read()
# Under tools/launch the main rank's lines start with "[rank 0] ".
it = [l.removeprefix("[rank 0] ") for l in log.splitlines()]
it = [l for l in it if l.startswith("mean iteration time")]
lines = [json.loads(l) for l in open(os.path.join(d, "train_log.jsonl"))] if os.path.exists(os.path.join(d, "train_log.jsonl")) else []
if rc != "0" or not it or not lines:
    print(f"{stage:13} x{n} {backend:5} FAILED (exit {rc}): " + " | ".join(log.strip().splitlines()[-3:]))
    sys.exit(0)
m = lines[-1]
mb = lambda k: m.get(k, -1) / 1e6
print(f"{stage:13} x{n} {backend:5} {it[0].split(':')[1].strip():>10}  model state {mb('held_model_state_bytes'):8.1f} MB  "
      f"in use {mb('mem_in_use_bytes'):8.1f} MB  peak {mb('mem_peak_bytes'):8.1f} MB  loss {m['loss']:.4f}")
PY
  done
fi

(cd "$W" && tar czf "$OUT/runs.tgz" ./*/train_log.jsonl ./*/eval_results.json 2>/dev/null)
echo
echo "check.sh: $status NOT OK; logs in $OUT"
exit "$status"
