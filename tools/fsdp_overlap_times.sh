#!/usr/bin/env bash
# Could task 6's prefetch (6b) and its reduce-scatter behind backward (6c) be judged by time, as
# task 3b's overlap is (grading/overlap_check.h)? Times the grader's own FSDP
# (task6/grading/mutant_stage) on 4 ranks at the overlap check's flags (512 tokens, 20 updates,
# 4 examples a rank), in a network namespace whose loopback a tbf qdisc limits to each RATE, in
# three versions: right (fsdp_none), each all-gather waited where it starts (fsdp_no_prefetch),
# each reduce-scatter waited where it starts (fsdp_reduce_waited). Each version runs ROUNDS
# times, interleaved. Prints one line per run and, per rate, each version's fastest and slowest.
# Root only (ip netns, tc).
#
#   tools/fsdp_overlap_times.sh [--rounds=N] [RATE_MBIT ...]    (default: 2 rounds; 300 1000 2000)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=2
rates=()
for a in "$@"; do
  case $a in
    --rounds=*) rounds=${a#*=} ;;
    --*) echo "fsdp_overlap_times: unknown flag $a" >&2; exit 2 ;;
    *) rates+=("$a") ;;
  esac
done
[ ${#rates[@]} -gt 0 ] || rates=(300 1000 2000)
[ "$(id -u)" = 0 ] || { echo "fsdp_overlap_times: needs root (a network namespace and tc)" >&2; exit 2; }
bazel build //tools:launch //task6/grading:mutant_stage >/dev/null 2>&1 ||
  { echo "fsdp_overlap_times: the build failed: bazel build //tools:launch //task6/grading:mutant_stage" >&2; exit 1; }
ns=distlm_fsdp_times_$$
out=$(mktemp -d)
trap 'ip netns del "$ns" 2>/dev/null || true; rm -rf "$out"' EXIT
versions=(fsdp_none fsdp_no_prefetch fsdp_reduce_waited)
for rate in "${rates[@]}"; do
  ip netns del "$ns" 2>/dev/null || true
  ip netns add "$ns"
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" tc qdisc add dev lo root tbf rate "${rate}mbit" burst 256kb limit 64mb
  for ((r = 1; r <= rounds; r++)); do
    for m in "${versions[@]}"; do
      start=$(date +%s.%N)
      if ! ip netns exec "$ns" bazel-bin/tools/launch --nproc_per_node=4 --timeout_s=300 -- \
          bazel-bin/task6/grading/mutant_stage --fsdp=overlap --mutation="$m" --max_steps=20 \
          --per_gpu_train_batch_size=4 --max_seq_length=512 --learning_rate=1e-3 --hidden_dropout_prob=0 \
          --attention_probs_dropout_prob=0 --do_eval=false --num_threads=1 --dist_timeout_s=60 \
          --output_dir="$out/$rate.$r.$m" >"$out/log" 2>&1; then
        echo "fsdp_overlap_times: $m at $rate Mbit/s failed:" >&2
        tail -5 "$out/log" >&2
        exit 1
      fi
      end=$(date +%s.%N)
      rm -rf "${out:?}/$rate.$r.$m"
      awk -v m="$m" -v r="$rate" -v s="$start" -v e="$end" 'BEGIN {printf "%s Mbit/s  %-20s %.1f s\n", r, m, e - s}' |
        tee -a "$out/times"
    done
  done
done
echo "fastest and slowest of each version:"
awk '{k = $1 " Mbit/s  " $3; t = $4; if (!(k in lo) || t < lo[k]) lo[k] = t; if (t > hi[k]) hi[k] = t}
     END {for (k in lo) printf "  %s  %.1f-%.1f s\n", k, lo[k], hi[k]}' "$out/times" | sort -n
