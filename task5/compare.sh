#!/usr/bin/env bash
# Task 5 (ZeRO stage 2) against task 3 (DDP) at 1, 2 and 4 local ranks (Gloo, //tools:launch):
# per-rank optimizer-state and gradient bytes, peak resident memory, step time, and what each
# update communicates; on the built-in tiny BERT and on a random mid-size one (hidden 256,
# 4 layers, intermediate 1024; skip it with configs=tiny).
#
#   bazel build //task3:reference //task5:reference //task3:make_bench_model //tools:launch
#   task5/compare.sh [steps=20] [configs="tiny mid"]
#   (binaries from $DISTLM_BIN, default bazel-out/k8-opt/bin)
#
# Columns, per rank (rank 0's log; the last rank holds up to N-1 fewer state elements):
#   opt_state   AdamW's exp_avg + exp_avg_sq bytes. Task 3: 8 x P (P parameters, from
#               ddp_buckets.json); task 5: opt_state_bytes from its log, 8 x ceil(P/N).
#   grad        gradient bytes kept for the optimizer step: task 3 4 x P; task 5 its shard
#               (backward still fills a whole 4 x P flat gradient first: see sharded_adamw.h).
#   rss0, rss1+ peak resident set in MiB (/usr/bin/time %M) of rank 0, and the largest of the
#               other ranks: LibTorch itself is most of it on these small models. Rank 0 also
#               writes the snapshots: in task 5 it gathers the whole optimizer state for them,
#               so its peak holds what task 3's holds all the time.
#               Runs with MALLOC_MMAP_THRESHOLD_=131072: otherwise freed multi-MiB buffers
#               (Gloo's staging copies, one per collective) stay in glibc's heaps (the preamble
#               asks for that, for speed; glibc's default drifts there too), and peak RSS grows
#               with the number of updates instead of showing what is live. Setting it also
#               turns the preamble's choice off, so both stages' step times include
#               page-faulting fresh buffers in.
#   step_ms     mean step_time_ms over updates 2..steps.
#   payload     comm_bytes per update (what the ranks hand the collectives, see
#               counting_process_group.h).
#   ring_net    bytes each rank sends per update with ring algorithms, closed form: all_reduce
#               of B bytes 2(N-1)/N B; reduce-scatter and all-gather of 4NS bytes (N-1) 4S each;
#               Gloo has no reduce_scatter, so task 5 there sends an all_reduce of 4NS (2(N-1) 4S)
#               plus the all-gather: 3(N-1) 4S, 1.5x DDP's. With a native reduce-scatter (MPI,
#               NCCL) it is 2(N-1) 4S, DDP's bytes up to the padding.
set -euo pipefail
cd "$(dirname "$0")/.."
steps="${1:-20}"
configs="${2:-tiny mid}"
bin="${DISTLM_BIN:-bazel-out/k8-opt/bin}"
export MALLOC_MMAP_THRESHOLD_=131072
work="$(mktemp -d /tmp/distlm_task5_compare.XXXXXX)"
trap 'rm -rf "$work"' EXIT
if [[ $configs == *mid* ]]; then
  "$bin/task3/make_bench_model" --output_dir="$work/bert_mid" --hidden_size=256 --num_hidden_layers=4 \
    --num_attention_heads=4 --intermediate_size=1024 >/dev/null
fi

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $steps updates, total batch 8"
printf "%-5s %-6s %5s %12s %12s %6s %6s %9s %12s %12s  %s\n" config stage ranks opt_state grad rss0 rss1+ \
  step_ms payload ring_net reduce_scatter
for config in $configs; do
  model=()
  [[ $config == mid ]] && model=(--model_name_or_path="$work/bert_mid")
  for n in 1 2 4; do
    common=(--max_steps="$steps" --per_gpu_train_batch_size=$(( 8 / n )) --max_seq_length=64 --learning_rate=1e-3
            --hidden_dropout_prob=0 --attention_probs_dropout_prob=0 --do_eval=false --num_threads=1
            --dist_timeout_s=120)
    for stage in task3 task5; do
      out="$work/$config/$stage/$n"
      log="$("$bin/tools/launch" --nproc_per_node="$n" -- /usr/bin/time -f "peak_rss_kb %M" \
             "$PWD/$bin/$stage/reference" "${common[@]}" "${model[@]}" --output_dir="$out" 2>&1)" \
        || { echo "$log" >&2; exit 1; }
      rss0="$(grep '^\[rank 0\] peak_rss_kb' <<<"$log" | awk '{printf "%.0f", $NF / 1024}')"
      rss1="$(grep 'peak_rss_kb' <<<"$log" | awk '!/^\[rank 0\]/ && $NF > m {m = $NF} END {printf "%.0f", m / 1024}')"
      logf="$out/train_log.jsonl"
      step_ms="$(jq -s '[.[1:][] | .step_time_ms] | add / length' "$logf")"
      payload="$(jq -s '.[-1].comm_bytes' "$logf")"
      if [[ $stage == task3 ]]; then
        p4="$(jq '[.[] | .bytes] | add' "$out/ddp_buckets.json")"
        opt=$(( 2 * p4 )); grad=$p4; rs="-"
        net="$(awk -v b="$p4" -v n="$n" 'BEGIN {printf "%.0f", 2 * (n - 1) / n * b}')"
      else
        opt="$(jq -s '.[-1].opt_state_bytes' "$logf")"; grad="$(jq -s '.[-1].grad_bytes' "$logf")"
        rs="$(jq -rs '.[-1].reduce_scatter' "$logf")"
        factor=2; [[ $rs != native ]] && factor=3
        net=$(( factor * (n - 1) * grad ))
      fi
      printf "%-5s %-6s %5d %12d %12d %6d %6d %9.2f %12d %12d  %s\n" "$config" "$stage" "$n" "$opt" "$grad" "$rss0" \
        "$rss1" "$step_ms" "$payload" "$net" "$rs"
    done
  done
done
