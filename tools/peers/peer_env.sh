# Sourced by the tests that read distlm's outputs with Python programs from PyPI
# (tensorboard_test.sh, trace_viewer_test.sh): defines say, not_ok, skipped and peer_python.
# The caller sets `name` (its messages' prefix) and `work` (a scratch folder) first.

failed=0
say() { echo "$name: $*"; }
not_ok() { say "NOT OK  $*"; failed=1; }
skipped() {
  say "********************************************************************************"
  for line in "$@"; do say "SKIPPED: $line"; done
  say "********************************************************************************"
}

# peer_python WHAT: sets `python` to the peers' environment's interpreter (tools/peers/setup.sh;
# PyPI the first time). Where it cannot be made: NOT OK and exit 1 if PyPI answers (a broken
# set-up), else SKIPPED (naming WHAT was not checked) and exit 0.
peer_python() {
  home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
  export DISTLM_CACHE=${DISTLM_CACHE:-$home/.cache/distlm}
  export PYTHONDONTWRITEBYTECODE=1
  if python=$(timeout 1500 "$here/setup.sh" 2>"$work/setup.err" | tail -1) && [ -x "$python" ]; then
    return 0
  fi
  tail -n 15 "$work/setup.err" | sed 's/^/  | /'
  if timeout 60 python3 -c 'import os, urllib.request
urllib.request.urlopen(os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/") + "/pip/", timeout=30)' \
    >/dev/null 2>&1; then
    not_ok "tools/peers/setup.sh failed, and PyPI answers: a broken set-up, not a missing network"
    exit 1
  fi
  skipped "tools/peers/setup.sh could not make the peers' environment in $DISTLM_CACHE" \
    "and PyPI cannot be reached: $1 Rerun online."
  exit 0
}
