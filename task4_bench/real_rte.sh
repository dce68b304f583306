#!/usr/bin/env bash
# A real fine-tuning run, as the assignment's Task 1 asks: pretrained BERT-architecture weights
# (all-MiniLM-L6-v2, which a PyPI package carries: tools/download/pypi_model.sh) fine-tuned on
# the real GLUE RTE train split for 3 epochs, evaluated on the dev split after every epoch, by
# distlm's part 1, by HuggingFace transformers (tools/peers/hf_finetune.py, the same data order
# and settings), and by task 2b and task 3 on 4 local ranks at the same total batch. A benchmark,
# not a test: on 2 CPU cores about 10 minutes per epoch per stage; on one H100 (--device=cuda)
# seconds for part 1 and transformers, about 45 s per epoch for 4 ranks sharing the GPU.
#
#   task4_bench/real_rte.sh [--data_dir=DIR] [--out=DIR] [--device=cpu|cuda] [--epochs=3]
#                           [--learning_rate=2e-5] [--stages=part1,transformers,task2b,task3]
#                           [--max_steps=N] [--sweep] [-- EXTRA DISTLM FLAGS...]
#
# --max_steps=N stops every stage after N updates (a quick look at the pipeline, not a result).
# --sweep first runs part 1 over a grid (learning rate 2e-5, 5e-5, 1e-4; 3 and 5 epochs; each
# its own run, as the learning rate decays to 0 over the run's length), prints the grid's table
# (dev accuracy per epoch of every setting, OUT/sweep/table.md), then runs the stages at the
# setting with the best last-epoch dev accuracy (ties: the fewer epochs, then the smaller rate).
# Six part-1 runs, 24 epochs: about 4 hours on 2 CPU cores, minutes on a GPU.
#
# Prints two tables: dev accuracy per epoch of every stage (and the published figure: none was
# found for this checkpoint), and, from 20 more updates of every stage with dropout off, the
# worst relative difference of each update's loss from transformers'.
#
# Starting point: the model with a 2-label head that transformers draws under seed 42
# (hf_finetune.py --init_out), which every stage loads, so all start from the same weights.
# Settings (the seed's; docs/results.md has the runs): max_seq_length 128, a total batch of 8, learning
# rate 2e-5 decaying linearly to 0, no warm-up, torch.optim.AdamW (--optim=adamw_torch, what
# transformers' Trainer runs; eps 1e-8, weight decay 0), clip 1.0, seed 42, lower-cased (the
# vocabulary is uncased), dropout 0.1 as the model's config says, each batch padded to its
# longest pair. --data_dir: a folder with RTE's train.tsv and dev.tsv (default:
# ../shared/reference/data/RTE beside the checkout, else $HOME/distlm_data/RTE from
# //tools/download). PyPI must be reachable the first time (the weights, the peers' Python).
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$(pwd)

data_dir="" out="" stages=part1,transformers,task2b,task3 epochs=3 device=cpu max_steps=-1 lr=2e-5 sweep=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --data_dir=*) data_dir=${1#--data_dir=} ;;
    --out=*) out=${1#--out=} ;;
    --stages=*) stages=${1#--stages=} ;;
    --epochs=*) epochs=${1#--epochs=} ;;
    --learning_rate=*) lr=${1#--learning_rate=} ;;
    --sweep) sweep=1 ;;
    --max_steps=*) max_steps=${1#--max_steps=} ;;
    --device=cpu | --device=cuda) device=${1#--device=} ;;
    --) shift; extra=("$@"); break ;;
    *) echo "usage: $0 [--data_dir=DIR] [--out=DIR] [--device=cpu|cuda] [--epochs=N] [--learning_rate=LR] [--stages=part1,transformers,task2b,task3] [--max_steps=N] [--sweep] [-- FLAGS...]" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$data_dir" ]; then
  for d in "$checkout/../shared/reference/data/RTE" "$HOME/distlm_data/RTE"; do
    if [ -f "$d/train.tsv" ]; then data_dir=$(cd "$d" && pwd); break; fi
  done
fi
[ -n "$data_dir" ] && [ -f "$data_dir/train.tsv" ] && [ -f "$data_dir/dev.tsv" ] || {
  echo "real_rte: no RTE train.tsv/dev.tsv: pass --data_dir (bazel run //tools/download -- --dest=\$HOME/distlm_data --what=rte)" >&2
  exit 2
}
out=${out:-$HOME/distlm_runs/real_rte-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
models=${DISTLM_CACHE:-$HOME/.cache/distlm}/models
bash tools/download/pypi_model.sh --dest="$models" --model=all-minilm-l6-v2 >&2
python=$(tools/peers/setup.sh | tail -1)
init="$out/init"
[ -f "$init/model.safetensors" ] || "$python" tools/peers/hf_finetune.py --model="$models/all-minilm-l6-v2" --init_out="$init" >&2

# One GPU per rank when there are 4; otherwise the 4 ranks share cuda:0 over Gloo.
x4_device=(--device=cpu)
if [ "$device" = cuda ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if [ "${gpus:-0}" -ge 4 ]; then x4_device=(--device=cuda --backend=nccl); else x4_device=(--device=cuda:0 --backend=gloo); fi
fi

bazel build //part1:reference //task2b:reference //task3:reference //tools:launch >&2
# Every part-1 and rank run's flags but the learning rate and the number of epochs; the flags
# after -- come last, so they override these (the last value of a flag wins).
base=(--model_name_or_path="$init" --do_lower_case=true --data_dir="$data_dir" --max_seq_length=128
  --pad_to_max_length=false --max_steps="$max_steps" --seed=42 --optim=adamw_torch
  --logging_steps=50 --overwrite_output_dir)
if [ "$sweep" -eq 1 ]; then
  mkdir -p "$out/sweep"
  for e in 3 5; do
    for r in 2e-5 5e-5 1e-4; do
      dir="$out/sweep/lr${r}_ep$e" start=$(date +%s)
      bazel-bin/part1/reference "${base[@]}" --learning_rate="$r" --num_train_epochs="$e" \
        --device="$device" --per_gpu_train_batch_size=8 --output_dir="$dir" "${extra[@]}" >"$dir.log" 2>&1 ||
        { tail -20 "$dir.log"; echo "real_rte: the sweep's run lr $r, $e epochs failed" >&2; exit 1; }
      echo "real_rte: sweep lr $r, $e epochs took $(($(date +%s) - start)) s ($dir.log)" >&2
    done
  done
  "$python" task4_bench/real_rte_table.py --sweep "$out/sweep" | tee "$out/sweep/table.md"
  best=$(sed -n 's/^best: lr \([^ ]*\), \([0-9]*\) epochs.*/\1 \2/p' "$out/sweep/table.md")
  [ -n "$best" ] || { echo "real_rte: the sweep gave no best setting (see $out/sweep)" >&2; exit 1; }
  read -r lr epochs <<<"$best"
  echo "real_rte: the stages at the sweep's best: learning rate $lr, $epochs epochs" >&2
fi
flags=("${base[@]}" --learning_rate="$lr" --num_train_epochs="$epochs" "${extra[@]}")
off=(--hidden_dropout_prob=0 --attention_probs_dropout_prob=0 --max_steps=20 --do_eval=false --plots=false)

run_stage() {  # stage, folder suffix, more flags...
  local stage=$1 suffix=$2 dir="$out/$1$2" start
  shift 2
  start=$(date +%s)
  case "$stage" in
    part1) bazel-bin/part1/reference "${flags[@]}" --device="$device" --per_gpu_train_batch_size=8 \
             --output_dir="$dir" "$@" ;;
    transformers)
      local hf=(--epochs="$epochs" --lr="$lr" --max_steps="$max_steps")
      [ "${1:-}" = "${off[0]}" ] && hf=(--lr="$lr" --dropout=0 --max_steps=20 --no_eval)
      "$python" tools/peers/hf_finetune.py --model="$init" --data_dir="$data_dir" --out="$dir" --device="$device" "${hf[@]}" ;;
    task2b | task3)
      bazel-bin/tools/launch --nproc_per_node=4 -- "$checkout/bazel-bin/$stage/reference" "${flags[@]}" \
        "${x4_device[@]}" --per_gpu_train_batch_size=2 --output_dir="$dir" "$@" ;;
    *) echo "real_rte: unknown stage '$stage' (part1, transformers, task2b, task3)" >&2; return 2 ;;
  esac >"$dir.log" 2>&1 || { tail -20 "$dir.log"; echo "real_rte: $stage failed" >&2; return 1; }
  echo "real_rte: $stage$suffix took $(($(date +%s) - start)) s ($dir.log)" >&2
}
IFS=, read -r -a stage_list <<<"$stages"
for s in "${stage_list[@]}"; do run_stage "$s" "" ; done
for s in "${stage_list[@]}"; do run_stage "$s" _dropout_off "${off[@]}"; done

"$python" task4_bench/real_rte_table.py "$out" "$models/all-minilm-l6-v2/SOURCE.json" "${stage_list[@]}"
echo "real_rte: runs, logs and plots in $out"
