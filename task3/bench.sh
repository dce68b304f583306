#!/usr/bin/env bash
# Mean iteration time of tasks 2a, 2b and 3 on N local ranks (Gloo, //tools:launch), and the
# share of task 3's communication hidden behind backward; on the built-in tiny BERT and on a
# random mid-size one (hidden 256, 4 layers, intermediate 1024).
#
#   bazel build //task2a:reference //task2b:reference //task3:reference //task3:make_bench_model //tools:launch
#   task3/bench.sh [nproc=4] [repeats=3] [extra flags for task 3, e.g. --bucket_cap_mb=4]
#   (binaries from $DISTLM_BIN, default bazel-out/k8-opt/bin)
#
# Flags as task2a/parity_test.cc, with --max_steps=40 --do_eval=false. Each (config, stage)
# runs `repeats` times, interleaved; the table gives the median of the runs' "mean iteration
# time over iterations 2..40" and, for task 3, over updates 2..40 of the median run:
#   exposed = mean comm_time_ms (the step blocked on all-reduces after backward),
#   busy    = mean comm_busy_ms (some bucket's all-reduce in flight),
#   hidden  = sum comm_hidden_ms / sum comm_busy_ms.
# For 2a/2b, comm = mean comm_time_ms (all of it after backward).
set -euo pipefail
cd "$(dirname "$0")/.."
nproc="${1:-4}"
repeats="${2:-3}"
shift $(( $# < 2 ? $# : 2 ))
task3_flags=("$@")
# The optimised build (.bazelrc's default); bazel-bin follows whichever config built last
# (e.g. --config=asan), so it is not used here.
bin="${DISTLM_BIN:-bazel-out/k8-opt/bin}"
work="$(mktemp -d /tmp/distlm_task3_bench.XXXXXX)"
mid="$work/bert_mid"
"$bin/task3/make_bench_model" --output_dir="$mid" --hidden_size=256 --num_hidden_layers=4 \
  --num_attention_heads=4 --intermediate_size=1024 >/dev/null

batch=$(( 8 / nproc > 0 ? 8 / nproc : 1 ))
common=(--max_steps=40 --per_gpu_train_batch_size="$batch" --max_seq_length=64 --learning_rate=1e-3
        --hidden_dropout_prob=0 --attention_probs_dropout_prob=0 --do_eval=false --num_threads=1
        --dist_timeout_s=120)

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $nproc ranks x batch $batch"
printf "%-6s %-7s %10s %10s %10s %8s   %s\n" config stage iter_ms comm_ms busy_ms hidden runs_ms
for config in tiny mid; do
  model=()
  [[ $config == mid ]] && model=(--model_name_or_path="$mid")
  declare -A runs=()
  for r in $(seq 1 "$repeats"); do
    for stage in task2a task2b task3; do
      out="$work/$config/$stage/$r"
      extra=()
      [[ $stage == task3 ]] && extra=("${task3_flags[@]}")
      log="$("$bin/tools/launch" --nproc_per_node="$nproc" -- "$bin/$stage/reference" "${common[@]}" \
             "${model[@]}" "${extra[@]}" --output_dir="$out" 2>&1)" || { echo "$log" >&2; exit 1; }
      ms="$(grep -o 'mean iteration time over iterations 2..40: [0-9.]*' <<<"$log" | awk '{print $NF}')"
      runs[$stage]+="$ms $r"$'\n'
    done
  done
  for stage in task2a task2b task3; do
    all="$(awk 'NF' <<<"${runs[$stage]}" | sort -g)"
    med_ms="$(awk '{print $1}' <<<"$all" | median)"
    med_run="$(awk -v m="$med_ms" '$1 == m {print $2; exit}' <<<"$all")"
    logf="$work/$config/$stage/$med_run/train_log.jsonl"
    comm="$(jq -s '[.[1:40][] | .comm_time_ms] | add / length' "$logf")"
    if [[ $stage == task3 ]]; then
      busy="$(jq -s '[.[1:40][] | .comm_busy_ms] | add / length' "$logf")"
      hidden="$(jq -s '([.[1:40][] | .comm_hidden_ms] | add) / ([.[1:40][] | .comm_busy_ms] | add)' "$logf")"
    else
      busy="-"; hidden="-"
    fi
    printf "%-6s %-7s %10.2f %10.2f %10s %8s   %s\n" "$config" "$stage" "$med_ms" "$comm" \
      "$( [[ $busy == - ]] && echo - || printf %.2f "$busy")" \
      "$( [[ $hidden == - ]] && echo - || printf %.0f%% "$(echo "$hidden * 100" | bc -l)")" \
      "$(awk '{printf "%s ", $1}' <<<"$all")"
  done
  unset runs
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); outputs in $work"
