#!/usr/bin/env bash
# Slurm for real: a one-node Slurm cluster on loopback (one_node_cluster.sh), then task 2b's
# reference started by `srun -n 4` with no rank, size or master flags, and by the handout's
# sbatch script (task2b.sbatch, its 4 nodes turned into 4 tasks on the one node). Each run's
# losses and gradient norms must equal those of the same run started by //tools:launch, whose
# ranks get torchrun's variables: the ranks, the world size and the master came from Slurm
# alone, and each rank had its own shard of the data.
#
# Needs root and Debian's Slurm (DISTLM_WITH_SLURM=1 tools/setup.sh): without either it says
# SKIPPED, loudly, and passes.
set -uo pipefail

runfiles=${TEST_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)/bazel-bin/tools/slurm/slurm_test.runfiles}/${TEST_WORKSPACE:-distlm}
cluster=$runfiles/tools/slurm/one_node_cluster.sh
sbatch_script=$runfiles/tools/slurm/task2b.sbatch
binary=$runfiles/task2b/reference
launch=$runfiles/tools/launch
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/slurm_test.XXXXXX")
flags=(--max_steps=3 --per_gpu_train_batch_size=2 --max_seq_length=32 --num_threads=1 --do_eval=false --plots=false)

skip() {
  echo "SKIPPED: tools/slurm/slurm_test: $* -- Slurm was NOT tested"
  exit 0
}
[ "$(id -u)" -eq 0 ] || skip "needs root (one_node_cluster.sh runs slurmctld and slurmd)"
for tool in slurmctld slurmd srun sbatch; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (DISTLM_WITH_SLURM=1 tools/setup.sh installs Slurm)"
done

failures=0
fail() {
  echo "FAILED: $*"
  failures=$((failures + 1))
}
trap 'bash "$cluster" down "$work/cluster" >/dev/null 2>&1' EXIT
SLURM_TEST_PORT=$((17000 + RANDOM % 2000))
export SLURM_TEST_PORT
up=$(bash "$cluster" up "$work/cluster") || { echo "$up"; echo "FAILED: the one-node cluster did not start"; exit 1; }
export SLURM_CONF=$work/cluster/slurm.conf
echo "=== $up"

# What each update logged, without times: losses, gradient norms, learning rates, ranks.
numbers() {
  python3 - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print({k: v for k, v in sorted(r.items()) if "time" not in k and not k.endswith("_ms") and "per_s" not in k})
PY
}

echo "=== the same run under //tools:launch (torchrun's variables)"
if ! timeout 90 "$launch" --nproc_per_node=4 -- "$binary" "${flags[@]}" --output_dir="$work/launch" >"$work/launch.log" 2>&1; then
  tail -n 20 "$work/launch.log"
  fail "the run under //tools:launch failed"
fi

echo "=== srun -n 4, no flags for ranks, size or master"
# Slurm's variables only: none of torchrun's may leak in from this shell.
env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT \
  timeout 90 srun -n 4 "$binary" "${flags[@]}" --output_dir="$work/srun" >"$work/srun.log" 2>&1
status=$?
if [ "$status" -ne 0 ]; then
  tail -n 20 "$work/srun.log"
  fail "srun -n 4 exited $status"
fi

echo "=== sbatch tools/slurm/task2b.sbatch (4 tasks on the one node)"
rm -f "$work"/distlm-task2b-*.out
(cd "$work" && env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT \
  DISTLM_BINARY="$binary" DISTLM_OUTPUT_DIR="$work/sbatch" \
  timeout 90 sbatch --wait --nodes=1 --ntasks-per-node=4 "$sbatch_script" "${flags[@]}") >"$work/sbatch.log" 2>&1
status=$?
cat "$work"/distlm-task2b-*.out >>"$work/sbatch.log" 2>/dev/null
if [ "$status" -ne 0 ]; then
  tail -n 20 "$work/sbatch.log"
  fail "sbatch --wait exited $status"
fi

want=$(numbers "$work/launch/train_log.jsonl" 2>/dev/null)
[ -n "$want" ] || fail "no train_log.jsonl from the launched run"
for run in srun sbatch; do
  got=$(numbers "$work/$run/train_log.jsonl" 2>/dev/null)
  if [ -z "$got" ]; then
    fail "$run: no train_log.jsonl in $work/$run"
  elif [ "$got" != "$want" ]; then
    fail "$run: its updates differ from the launched run's:"
    diff <(echo "$want") <(echo "$got") | head -n 10
  else
    echo "OK: $run: $(echo "$got" | wc -l) updates equal to the launched run's (4 ranks)"
  fi
done
# Where the master came from, as each run's rank 0 reports it: from Slurm, not the default
# 127.0.0.1:29500 (which would also work on one node).
for run in srun sbatch; do
  line=$(grep -h -m1 " ranks (" "$work/$run.log")
  echo "$run: $line"
  case "$line" in
    *"4 ranks (slurm: SLURM_NTASKS=4), master localhost (SLURM_STEP_NODELIST) port 1"[0-9][0-9][0-9][0-9]" (SLURM_JOB_ID)"*) ;;
    *) fail "$run: rank 0 did not take its ranks and master from Slurm: '$line'" ;;
  esac
done

if [ "$failures" -gt 0 ]; then
  echo "tools/slurm/slurm_test: $failures failure(s); logs in $work"
  exit 1
fi
echo "tools/slurm/slurm_test: OK"
