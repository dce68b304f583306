#!/usr/bin/env bash
# Task 6's three schedules on a model the report drew, timed side by side:
#
#   task4_bench/fsdp_modes.sh REPORT_DIR MODEL [RANKS...]     # e.g. /tmp/rep_mid bert_mid 2 4
#
# REPORT_DIR is a //task4_bench:report --out folder holding model_MODEL/ and data/. For each
# world size, --fsdp=blocking (6a), prefetch (6b) and overlap (6c), 6 updates of 2 examples per
# rank, one thread per rank; prints the medians of updates 2..6 from rank 0's train_log.jsonl:
# step time, communication exposed (the rank blocked on it), busy (some collective in flight)
# and hidden (busy - exposed). Needs //tools:launch and //task6:reference built (bazel build).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: task4_bench/fsdp_modes.sh REPORT_DIR MODEL [RANKS...]" >&2
  exit 2
fi
root=$1 model=$2
shift 2
ranks=("${@:-2}")
[ -d "$root/model_$model" ] && [ -d "$root/data" ] || { echo "fsdp_modes: $root has no model_$model/ or data/" >&2; exit 2; }
bin=$(bazel info bazel-bin 2>/dev/null)
work=$(mktemp -d /tmp/fsdp_modes.XXXXXX)
for n in "${ranks[@]}"; do
  for mode in blocking prefetch overlap; do
    out=$work/${model}_n${n}_$mode
    if ! "$bin/tools/launch" --nproc_per_node="$n" -- "$bin/task6/reference" --model_name_or_path="$root/model_$model" \
        --data_dir="$root/data" --per_gpu_train_batch_size=2 --max_steps=6 --do_eval=false --num_threads=1 \
        --max_seq_length=128 --plots=false --output_dir="$out" --fsdp="$mode" >"$out.log" 2>&1; then
      echo "fsdp_modes: $model N=$n --fsdp=$mode failed; the end of $out.log:" >&2
      tail -3 "$out.log" >&2
      exit 1
    fi
    python3 - "$out" "$model" "$n" "$mode" <<'PY'
import json, statistics, sys
out, model, n, mode = sys.argv[1:]
lines = [json.loads(l) for l in open(out + "/train_log.jsonl")][1:]
med = lambda k: statistics.median(l[k] for l in lines)
busy, hidden = med("comm_busy_ms"), med("comm_hidden_ms")
print(f"{model} N={n} {mode:8} step {med('step_time_ms'):7.1f} ms  exposed {med('comm_time_ms'):6.1f}  "
      f"busy {busy:6.1f}  hidden {hidden:6.1f} ms ({100 * hidden / max(busy, 1e-9):.0f} % of busy)")
PY
  done
done
