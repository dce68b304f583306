#!/usr/bin/env bash
# tools/peers/compare_fsdp.sh --world_size=N --model=tiny|mid [--batch_size=8] [--threads=1]
#   [--steps=20] [--seq_len=128] [--repeats=3] [--bin_dir=DIR] [--model_dir=DIR]
#   [--prefetch=explicit|implicit] [--async_gather=true|false] [--blocking]
# distlm's task 6 (its own FSDP, --fsdp=overlap: each unit's all-gather launched one unit ahead,
# each reduce-scatter left running behind the rest of backward) against PyTorch's FSDP2
# (tools/peers/fsdp_step_time.py: fully_shard on the embeddings, each layer and the root, the
# same units) on N local ranks over Gloo on 127.0.0.1, as compare_ddp.sh compares task 3 with
# DDP: the same model shape, batch per rank, sequence length, dropout 0.1, threads per rank and
# torch; median step time over steps 2..N (task 6: rank 0's step_time_ms in train_log.jsonl;
# FSDP2: each step's slowest rank); the two run alternately --repeats times and each side's
# figure is the median of its runs. Prints each run's lines on stderr and one JSON line on
# stdout, with task 6's exposed, hidden and busy communication, the bytes it handed to its
# collectives per update (comm_bytes), and what each side holds of the model state. A
# benchmark: run it on an idle machine.
# --prefetch, --async_gather: fsdp_step_time.py's. The default, explicit prefetch with
# asynchronous gathers, is the schedule of task 6's --fsdp=prefetch (on a CPU device FSDP2's
# own defaults issue every collective synchronously: see fsdp_step_time.py); FSDP2's
# reduce-scatters stay synchronous, so --fsdp=overlap's second half has no counterpart.
# --blocking: each run also times task 6 with --fsdp=blocking (task6_blocking_* in the JSON).
# --bin_dir=DIR (or DISTLM_PEERS_BIN_DIR=DIR): a folder with task6/reference and tools/launch
# already built (bazel-bin, or a Bazel test's runfiles); no `bazel build` then. "same_torch" in
# the JSON says whether task 6's libtorch_cpu is the peer's (a warning on stderr when not).
# --model_dir=DIR: the HuggingFace BERT folder task 6 starts from (with data/train.tsv), in the
# --model preset's shape with vocabulary 30522 (checked); default the cache's
# peers-out/models/MODEL, made by make_checkpoint.py from ../shared/reference when missing.
set -euo pipefail
shopt -s inherit_errexit  # a run that fails inside $(...) stops the script
# The physical folder: called through a link (a Bazel test's runfiles), the checkout's.
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
cd "$here/../.."
me=tools/peers/compare_fsdp.sh
# shellcheck source=tools/peers/compare_common.sh
. "$here/compare_common.sh"
compare_defaults
prefetch=explicit async_gather=true blocking=0
for arg in "$@"; do
  compare_flag "$arg" && continue
  case "$arg" in
    --prefetch=*) prefetch=${arg#*=} ;;
    --async_gather=*) async_gather=${arg#*=} ;;
    --blocking) blocking=1 ;;
    *) echo "$me: unknown flag '$arg' (see the top of the file)" >&2; exit 2 ;;
  esac
done
case "$prefetch" in implicit|explicit) ;; *) echo "$me: --prefetch must be implicit or explicit, got '$prefetch'" >&2; exit 2 ;; esac
case "$async_gather" in true|false) ;; *) echo "$me: --async_gather must be true or false, got '$async_gather'" >&2; exit 2 ;; esac
compare_check task6/reference tools/launch
compare_setup task6/reference "task 6" //task6:reference //tools:launch

peer_flags=(--prefetch="$prefetch")
[ "$async_gather" = false ] || peer_flags+=(--async_gather)
cpp_runs=() blocking_runs=() fsdp_runs=()
for r in $(seq 1 "$repeats"); do
  cpp_runs+=("$(compare_run_stage task6/reference "$work/task6_$r" --fsdp=overlap)")
  also=''
  if [ "$blocking" = 1 ]; then
    blocking_runs+=("$(compare_run_stage task6/reference "$work/task6_blocking_$r" --fsdp=blocking)")
    also=", --fsdp=blocking ${blocking_runs[-1]} ms"
  fi
  fsdp=$(compare_run_peer fsdp_step_time.py "${peer_flags[@]}")
  fsdp_runs+=("$fsdp")
  echo "compare_fsdp: run $r: task 6 ${cpp_runs[-1]} ms$also" >&2
done
# task 6's parts (the means over steps 2..N; the bytes of the last update), from run 1.
parts=$(jq -s '.[1:] | {compute_ms: (map(.compute_time_ms) | add / length),
  comm_exposed_ms: (map(.comm_exposed_ms) | add / length), comm_hidden_ms: (map(.comm_hidden_ms) | add / length),
  comm_busy_ms: (map(.comm_busy_ms) | add / length), comm_bytes: .[-1].comm_bytes, comm_ops: .[-1].comm_ops,
  held_model_state_bytes: .[-1].held_model_state_bytes, full_bytes_peak: .[-1].full_bytes_peak,
  mem_peak_bytes: .[-1].mem_peak_bytes, reduce_scatter: .[-1].reduce_scatter}' "$work/task6_1/train_log.jsonl")

"$python" - "$parts" "${cpp_runs[*]}" "${blocking_runs[*]}" "$same" "${fsdp_runs[@]}" <<'PY'
import json, statistics, sys
parts = json.loads(sys.argv[1])
cpp = [float(x) for x in sys.argv[2].split()]
blocking = [float(x) for x in sys.argv[3].split()]
try:
    fsdp = [json.loads(x) for x in sys.argv[5:]]
except ValueError:
    sys.exit(f"compare_fsdp: fsdp_step_time.py's last line is not JSON: {sys.argv[5:]!r:.300}")
cpp_ms, fsdp_ms = statistics.median(cpp), statistics.median(d["ms_per_step"] for d in fsdp)
d = fsdp[0]
out = {
    "model": d["model"], "world_size": d["world_size"], "batch_size": d["batch_size"],
    "seq_len": d["seq_len"], "threads": d["threads"], "torch": d["torch"], "same_torch": sys.argv[4] == "true",
    "repeats": len(cpp), "fsdp2_prefetch": d["prefetch"], "fsdp2_async_gather": d["async_gather"],
    "task6_ms": round(cpp_ms, 2), "pytorch_fsdp2_ms": round(fsdp_ms, 2),
    "task6_over_fsdp2": round(cpp_ms / fsdp_ms, 3),
    "task6_runs_ms": [round(x, 1) for x in cpp], "fsdp2_runs_ms": [round(x["ms_per_step"], 1) for x in fsdp]}
if blocking:
    b = statistics.median(blocking)
    out.update({"task6_blocking_ms": round(b, 2), "task6_blocking_over_fsdp2": round(b / fsdp_ms, 3),
                "task6_blocking_runs_ms": [round(x, 1) for x in blocking]})
out["task6_run1_parts"] = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in parts.items()}
out["fsdp2_held_model_state_bytes"] = d["held_model_state_bytes"]
print(json.dumps(out))
PY
