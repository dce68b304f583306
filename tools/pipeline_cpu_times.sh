#!/usr/bin/env bash
# What task 7b's 1F1B costs in CPU time, counted as the grader counts a run (its control group:
# grading/jail/run_cgroup.h), against the recompute forgery (all forward all backward, each
# forward run again at its backward: task7/grading/mutant_stage --mutation=
# pp_recompute_logged_as_1f1b). Both on 2 ranks at the share check's flags (512 tokens, 10
# updates), ROUNDS times each, interleaved; one line per run, then each one's least and most.
# Root only (a cgroup v1 cpuacct hierarchy at /sys/fs/cgroup/cpuacct).
#
#   tools/pipeline_cpu_times.sh [--rounds=N]    (default: 4)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=4
for a in "$@"; do
  case $a in
    --rounds=*) rounds=${a#*=} ;;
    *) echo "pipeline_cpu_times: unknown flag $a" >&2; exit 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "pipeline_cpu_times: --rounds must be a positive number" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "pipeline_cpu_times: needs root (a control group per run)" >&2; exit 2; }
acct=/sys/fs/cgroup/cpuacct
[ -w "$acct" ] || { echo "pipeline_cpu_times: no writable cgroup v1 cpuacct hierarchy at $acct" >&2; exit 2; }
bazel build //tools:launch //task7:reference //task7/grading:mutant_stage >/dev/null 2>&1 ||
  { echo "pipeline_cpu_times: the build failed: bazel build //tools:launch //task7:reference //task7/grading:mutant_stage" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"; rmdir "$acct"/distlm_pipeline_cpu_* 2>/dev/null || true' EXIT
flags=(--max_steps=10 --per_gpu_train_batch_size=8 --learning_rate=1e-3 --hidden_dropout_prob=0
  --attention_probs_dropout_prob=0 --do_eval=false --num_threads=1 --dist_timeout_s=60 --max_seq_length=512
  --model_parallel=pipeline --pipeline_schedule=1f1b --micro_batches=4)
for ((r = 1; r <= rounds; r++)); do
  for v in 1f1b recompute; do
    group=$acct/distlm_pipeline_cpu_$$_${v}_$r
    mkdir "$group"
    binary=(bazel-bin/task7/reference)
    [ "$v" = recompute ] && binary=(bazel-bin/task7/grading/mutant_stage --mutation=pp_recompute_logged_as_1f1b)
    if ! bash -c 'echo 0 >"$1/cgroup.procs"; shift; exec "$@"' _ "$group" bazel-bin/tools/launch --nproc_per_node=2 \
        --timeout_s=300 -- "${binary[@]}" "${flags[@]}" --output_dir="$out/$v.$r" >"$out/log" 2>&1; then
      echo "pipeline_cpu_times: $v failed:" >&2
      tail -5 "$out/log" >&2
      exit 1
    fi
    awk -v v="$v" '{printf "%-10s %.2f s of CPU time in all\n", v, $1 / 1e9}' "$group/cpuacct.usage" | tee -a "$out/times"
    rmdir "$group"
    rm -rf "${out:?}/$v.$r"
  done
done
echo "least and most of each:"
awk '{t = $2; if (!($1 in lo) || t < lo[$1]) lo[$1] = t; if (t > hi[$1]) hi[$1] = t}
     END {for (k in lo) printf "  %-10s %.2f-%.2f s\n", k, lo[k], hi[k]}' "$out/times" | sort
