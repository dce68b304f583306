#!/usr/bin/env bash
# Sets a CloudLab node up for distlm. tools/cloudlab/profile.py has every node run it as root at
# each boot, from the checkout it cloned (/local/distlm):
#
#   1. tools/setup.sh: the Debian packages (idempotent: seconds when they are there);
#   2. with DISTLM_TORCH_WHEEL=VERSION (the profile's GPU nodes): LibTorch VERSION from the
#      torch wheel (tools/torch_wheel.sh) in /local/distlm-cache, and /etc/profile.d/distlm.sh
#      exporting DISTLM_LIBTORCH so that the students' own builds use it too;
#   3. bazel build of the stages' binaries and the launcher, as the experiment's user.
#
# Every step goes, with its time, to DISTLM_SETUP_LOG (default /local/logs/distlm-setup.log,
# readable by everyone), whose last line is "distlm: ready" or "distlm: FAILED at STEP, see LOG";
# the exit status is 0 or 1 accordingly.
#
# The experiment's user: the account named by `geni-get user_urn` (the experiment's creator),
# else the owner of the only folder under /users, else nobody (several accounts and no
# geni-get: the checkout stays root's and root builds). The checkout is handed to that user
# BEFORE the build, and the build runs as that user: Bazel's cache is per user, so a build run
# as root would leave the student a cold cache and bazel-* links into /root that they cannot read.
#
# Idempotent: a reboot runs it again; the clone (done by the profile's command) is skipped when
# the checkout exists, nothing here discards work, and the build is then incremental.
set -uo pipefail

LOG=${DISTLM_SETUP_LOG:-/local/logs/distlm-setup.log}
CHECKOUT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${DISTLM_CACHE:-/local/distlm-cache}
# The stages' main binaries: the solutions' in the repository, the student's in a kit (which
# has no reference folders).
SIDE=reference
[ -d "$CHECKOUT/part1/reference" ] || SIDE=student
TARGETS=("//part1:$SIDE" "//task2a:$SIDE" "//task2b:$SIDE" "//task3:$SIDE" "//task5:$SIDE" //tools:launch)

if [ "$(id -u)" -ne 0 ]; then
  echo "tools/cloudlab/startup.sh: run it as root (the profile runs it through sudo)" >&2
  exit 2
fi
if ! { mkdir -p "$(dirname "$LOG")" && touch "$LOG" && chmod 644 "$LOG"; }; then
  echo "tools/cloudlab/startup.sh: cannot write $LOG" >&2
  exit 2
fi
echo "tools/cloudlab/startup.sh: logging to $LOG" >&2
exec >>"$LOG" 2>&1

log() { echo "[$(date '+%Y-%m-%d %H:%M:%S')] $*"; }
fail() {
  log "step '$1' failed"
  echo "distlm: FAILED at $1, see $LOG"
  exit 1
}
# step NAME COMMAND...: runs COMMAND, its output in the log between two timestamped lines.
step() {
  local name=$1 start=$SECONDS
  shift
  log "== $name: start"
  "$@" || fail "$name"
  log "== $name: done ($((SECONDS - start)) s)"
}

log "distlm set-up on $(hostname) (boot $(cut -d' ' -f1 /proc/uptime 2>/dev/null) s ago): checkout $CHECKOUT"
cd "$CHECKOUT" || fail "cd $CHECKOUT"

# The experiment's user (see the top).
user=""
if command -v geni-get >/dev/null 2>&1; then
  urn=$(geni-get user_urn 2>/dev/null || true)
  candidate=${urn##*+}
  if [ -n "$candidate" ] && id -u "$candidate" >/dev/null 2>&1; then user=$candidate; fi
fi
if [ -z "$user" ] && [ -d /users ]; then
  homes=(/users/*/)
  if [ "${#homes[@]}" -eq 1 ] && [ -d "${homes[0]}" ]; then
    candidate=$(stat -c %U "${homes[0]}")
    if [ "$candidate" != root ] && [ "$candidate" != UNKNOWN ]; then user=$candidate; fi
  fi
fi
# as_user COMMAND...: COMMAND as the experiment's user, with their HOME (so their Bazel cache),
# or as root when there is none. The environment is rebuilt: what the build needs is passed.
as_user() {
  if [ -z "$user" ]; then DISTLM_CACHE=$CACHE "$@"; return; fi
  runuser -u "$user" -- env -i "HOME=$(getent passwd "$user" | cut -d: -f6)" "USER=$user" \
    "LOGNAME=$user" "PATH=$PATH" "LANG=${LANG:-C.UTF-8}" "DISTLM_CACHE=$CACHE" \
    ${DISTLM_LIBTORCH:+"DISTLM_LIBTORCH=$DISTLM_LIBTORCH"} "$@"
}
if [ -n "$user" ]; then
  log "experiment user: $user"
  step "chown the checkout to $user" chown -R "$user:$(id -gn "$user")" "$CHECKOUT"
else
  log "experiment user: none found (no geni-get answer, not exactly one folder under /users); the checkout stays root's"
fi

if [ -z "${DISTLM_TORCH_WHEEL:-}" ]; then
  step "tools/setup.sh" bash tools/setup.sh
else
  # tools/setup.sh skips Debian's LibTorch when DISTLM_LIBTORCH is set; the wheel's root is
  # known only once tools/torch_wheel.sh (which needs setup.sh's pip) has run, so say so.
  step "tools/setup.sh" env "DISTLM_LIBTORCH=(torch wheel $DISTLM_TORCH_WHEEL, next step)" bash tools/setup.sh
  mkdir -p "$CACHE"
  [ -z "$user" ] || chown "$user:$(id -gn "$user")" "$CACHE"
  wheel_out=$(mktemp)
  # Its last line is the LibTorch root; all of its output goes to the log as well.
  torch_wheel() {
    as_user bash tools/torch_wheel.sh "$DISTLM_TORCH_WHEEL" >"$wheel_out"
    local status=$?
    cat "$wheel_out"
    return $status
  }
  step "LibTorch $DISTLM_TORCH_WHEEL from the torch wheel (tools/torch_wheel.sh)" torch_wheel
  root_dir=$(tail -1 "$wheel_out")
  rm -f "$wheel_out"
  [ -d "$root_dir/lib" ] || fail "LibTorch $DISTLM_TORCH_WHEEL (no lib/ under '$root_dir')"
  export DISTLM_LIBTORCH=$root_dir
  echo "export DISTLM_LIBTORCH=$root_dir" >/etc/profile.d/distlm.sh
  log "DISTLM_LIBTORCH=$root_dir, exported to login shells by /etc/profile.d/distlm.sh"
  command -v nvidia-smi >/dev/null 2>&1 ||
    log "note: no nvidia-smi: this image has no NVIDIA driver, so --device=cuda will be refused until one is installed"
fi

log "targets: ${TARGETS[*]}"
step "bazel build" as_user bazel build "${TARGETS[@]}"

log "done in $SECONDS s"
echo "distlm: ready"
