#!/usr/bin/env bash
# What a newcomer's first `./distlm run` costs on a fresh Debian 12 machine, set-up included: a
# bare Debian 12 root (debootstrap, minbase) with git, a clone of this checkout's HEAD in it,
# then `./distlm run` there with nothing installed and empty caches, timed, its output counted.
#
#   tools/fresh_machine_run.sh [--keep]
#
# Prints "fresh: ./distlm run took S s and printed N lines (M from tools/setup.sh)" and keeps
# the output in the work folder it names. A benchmark, not a test (minutes: packages from the
# Debian mirror, then a cold Bazel build). Needs root, debootstrap and a Debian mirror
# (DISTLM_DEBIAN_MIRROR, default deb.debian.org). Exits 3 when no root can be made.
# Its figures: docs/results.md, "A fresh machine's first run".
set -euo pipefail
cd "$(dirname "$0")/.."
keep=0
[ "${1:-}" = --keep ] && keep=1
[ "$(id -u)" -eq 0 ] || { echo "fresh: needs root (debootstrap, chroot): not run" >&2; exit 3; }
command -v debootstrap >/dev/null || { echo "fresh: debootstrap is not installed" >&2; exit 3; }
work=$(mktemp -d /tmp/distlm_fresh.XXXXXX)
root=$work/root
cleanup() {
  for m in "$root/dev" "$root/sys" "$root/proc"; do
    if mountpoint -q "$m" 2>/dev/null; then umount -R "$m" 2>/dev/null || umount -lR "$m" 2>/dev/null || true; fi
  done
  if [ "$keep" -eq 1 ] || grep -q " $work/" /proc/self/mounts; then
    echo "fresh: kept $work"
  else
    cp "$work/run.out" "/tmp/distlm_fresh_run.out" 2>/dev/null || true
    rm -rf --one-file-system "$work"
    echo "fresh: the run's output is in /tmp/distlm_fresh_run.out"
  fi
}
trap cleanup EXIT
t0=$(date +%s)
debootstrap --variant=minbase --include=git,ca-certificates bookworm "$root" \
  "${DISTLM_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$work/debootstrap.log" 2>&1 || {
  tail -20 "$work/debootstrap.log"; echo "fresh: debootstrap failed" >&2; exit 3; }
echo "fresh: Debian 12 root made ($(( $(date +%s) - t0 )) s)"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
cp /etc/resolv.conf "$root/etc/resolv.conf"
git clone -q "$PWD" "$root/root/distlm"
echo "fresh: cloned $(git rev-parse --short HEAD) into the root; ./distlm run there"
start=$(date +%s)
rc=0
chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
  bash -c 'cd /root/distlm && ./distlm run' >"$work/run.out" 2>&1 || rc=$?
took=$(( $(date +%s) - start ))
# The root's Bazel server would hold its mounts.
chroot "$root" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin bash -c 'cd /root/distlm && bazel shutdown' >/dev/null 2>&1 || true
lines=$(wc -l <"$work/run.out")
setup_lines=$(grep -c '^tools/setup.sh' "$work/run.out" || true)
tail -6 "$work/run.out"
echo "fresh: ./distlm run exited $rc, took $took s and printed $lines lines ($setup_lines from tools/setup.sh)"
exit "$rc"
