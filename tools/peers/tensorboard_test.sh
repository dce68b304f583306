#!/usr/bin/env bash
# tools/peers/tensorboard_test.sh --part1=PATH [--keep]
# --report_to=tensorboard against TensorBoard itself (the peers' environment: tensorboard and
# Pillow from PyPI, tools/peers/setup.sh):
# 1. two runs of part 1 on the built-in sample (12 updates, 2 epochs; learning rates 5e-5 and
#    2e-4, so two curves), each with --report_to=tensorboard;
# 2. TensorBoard's own event reader over both (tensorboard_check.py): every number of every log
#    line and evaluation at its step, equal to the float32 of the log's value; the arguments text;
# 3. TensorBoard's web page in a real browser: `tensorboard --logdir` on 127.0.0.1, headless
#    Chromium screenshots the Scalars dashboard filtered to train/loss with smoothing off, and
#    the image must show both runs' curves: at least 150 pixels in each of the two run colours
#    TensorBoard 2.21 gives its first two runs, right of the run selector and below the search
#    bar (tensorboard_screenshot.py). The screenshot is kept: bazel-testlogs/tools/peers/
#    tensorboard_test/test.outputs/ (TEST_UNDECLARED_OUTPUTS_DIR), or the work folder by hand.
# OK / NOT OK per step; exits 1 if any is NOT OK. SKIPPED, loudly, and a pass: every step when
# PyPI cannot be reached to make the environment; step 3 alone when no Chromium is installed
# (tools/setup.sh installs Debian's with DISTLM_WITH_BROWSER=1, as .ci/run does).
set -uo pipefail
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
part1='' keep=0
for arg in "$@"; do
  case "$arg" in
    --part1=*) part1=${arg#*=} ;;
    --keep) keep=1 ;;
    *) echo "tools/peers/tensorboard_test.sh: unknown flag '$arg' (see the top of the file)" >&2; exit 2 ;;
  esac
done
[ -n "$part1" ] || { echo "tools/peers/tensorboard_test.sh: --part1=PATH (//part1:reference) is needed" >&2; exit 2; }
part1=$(cd "$(dirname "$part1")" && pwd)/$(basename "$part1")
name=tensorboard_test
work=$(mktemp -d "${TEST_TMPDIR:-${TMPDIR:-/tmp}}/tensorboard_test.XXXXXX")
server=''
cleanup() {
  [ -z "$server" ] || kill "$server" 2>/dev/null
  if [ "$keep" = 1 ]; then echo "tensorboard_test: outputs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
# shellcheck source=tools/peers/peer_env.sh
. "$here/peer_env.sh"
peer_python "TensorBoard did not read distlm's event files."

# 1. Two runs.
for lr in 5e-5 2e-4; do
  if ! timeout 300 "$part1" --max_steps=12 --num_train_epochs=2 --per_gpu_train_batch_size=8 --max_seq_length=64 \
    --num_threads=1 --plots=false --report_to=tensorboard --learning_rate=$lr --output_dir="$work/logs/lr$lr" \
    >"$work/part1_$lr.log" 2>&1; then
    tail -n 10 "$work/part1_$lr.log" | sed 's/^/  | /'
    not_ok "part 1 with --report_to=tensorboard --learning_rate=$lr failed"
    exit 1
  fi
done
say "OK      two runs of part 1 with --report_to=tensorboard"

# 2. TensorBoard's reader.
if "$python" "$here/tensorboard_check.py" "$work/logs/lr5e-5" "$work/logs/lr2e-4" | sed 's/^/  /'; then
  say "OK      TensorBoard's event reader: every logged number at its step"
else
  not_ok "TensorBoard's event reader disagrees with the logs (above)"
fi

# 3. The web page in a browser.
browser=''
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
done
if [ -z "$browser" ]; then
  skipped "no Chromium here: TensorBoard's page was not looked at in a browser" \
    "(DISTLM_WITH_BROWSER=1 tools/setup.sh installs Debian's chromium)"
  exit "$failed"
fi
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$(dirname "$python")/tensorboard" --logdir "$work/logs" --host 127.0.0.1 --port "$port" >"$work/tensorboard.log" 2>&1 &
server=$!
# Until it serves both runs (it scans the folder when it starts).
runs=''
for _ in $(seq 1 60); do
  runs=$("$python" -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/data/runs', timeout=5).read().decode())" 2>/dev/null)
  [[ "$runs" == *lr5e-5* && "$runs" == *lr2e-4* ]] && break
  sleep 1
done
if [[ "$runs" != *lr5e-5* || "$runs" != *lr2e-4* ]]; then
  tail -n 10 "$work/tensorboard.log" | sed 's/^/  | /'
  not_ok "tensorboard --logdir did not serve both runs within 60 s (it served: ${runs:-nothing})"
  exit 1
fi
shot_dir=${TEST_UNDECLARED_OUTPUTS_DIR:-$work}
shot=$shot_dir/tensorboard_scalars.png
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/chromium" \
  --window-size=1400,1000 --virtual-time-budget=20000 --screenshot="$shot" \
  "http://127.0.0.1:$port/#scalars&tagFilter=train%2Floss%24&_smoothingWeight=0" >"$work/chromium.log" 2>&1
if [ ! -s "$shot" ]; then
  tail -n 10 "$work/chromium.log" | sed 's/^/  | /'
  not_ok "headless Chromium wrote no screenshot"
  exit 1
fi
if why=$("$python" "$here/tensorboard_screenshot.py" "$shot" 2>&1); then
  say "OK      TensorBoard in Chromium: $why; the screenshot: $shot"
else
  not_ok "TensorBoard in Chromium: $why (the screenshot: $shot)"
fi
exit "$failed"
