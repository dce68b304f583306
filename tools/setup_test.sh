#!/usr/bin/env bash
# tools/setup.sh is quiet: one line per step on the terminal, apt's and dpkg's output in the log
# it names, and the log's tail (with a non-zero exit) only when a step fails. Run against
# stand-ins for apt-get, dpkg-query and update-alternatives, so it installs nothing.
set -uo pipefail
setup=$(realpath "${1:?usage: setup_test.sh tools/setup.sh}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
fail=0
check() { if eval "$2"; then echo "OK      $1"; else echo "NOT OK  $1"; fail=1; fi; }

# Nothing installed; apt prints what a real install prints (hundreds of lines) or, with
# APT_FAIL=1, fails as apt does on an unknown package.
cat >"$tmp/bin/dpkg-query" <<'SH'
#!/bin/sh
exit 1
SH
cat >"$tmp/bin/apt-get" <<'SH'
#!/bin/sh
if [ "$1" = install ] && [ "${APT_FAIL:-0}" = 1 ]; then
  echo "E: Unable to locate package libtorch-dev"; exit 100
fi
i=0; while [ $i -lt 400 ]; do echo "Unpacking package-$i ..."; i=$((i + 1)); done
SH
cat >"$tmp/bin/update-alternatives" <<'SH'
#!/bin/sh
exit 1
SH
cat >"$tmp/bin/id" <<'SH'
#!/bin/sh
echo 0
SH
chmod +x "$tmp/bin/"*

PATH="$tmp/bin:$PATH" DISTLM_SETUP_LOG="$tmp/ok.log" bash "$setup" >"$tmp/ok.out" 2>&1
rc=$?
check "a full install exits 0 (got $rc)" '[ "$rc" -eq 0 ]'
lines=$(wc -l <"$tmp/ok.out")
check "a full install prints at most 5 lines (got $lines)" '[ "$lines" -le 5 ]'
check "the terminal names the log" 'grep -q "$tmp/ok.log" "$tmp/ok.out"'
check "apt's output is in the log, not on the terminal" \
  'grep -q "Unpacking package-399" "$tmp/ok.log" && ! grep -q Unpacking "$tmp/ok.out"'
check "each step says how long it took" 'grep -qE "apt-get install [0-9]+ package\(s\) \([0-9]+ s\)" "$tmp/ok.out"'

PATH="$tmp/bin:$PATH" APT_FAIL=1 DISTLM_SETUP_LOG="$tmp/bad.log" bash "$setup" >"$tmp/bad.out" 2>&1
rc=$?
check "a failed install exits non-zero (got $rc)" '[ "$rc" -ne 0 ]'
check "a failed install names the step and the log" 'grep -q "apt-get install .* FAILED .*$tmp/bad.log" "$tmp/bad.out"'
check "a failed install shows apt's error" 'grep -q "Unable to locate package" "$tmp/bad.out"'
[ "$fail" -eq 0 ] || { echo "--- output of the full install:"; cat "$tmp/ok.out"; }
exit "$fail"
