#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder's image, from /autograder/source
# (this zip, unpacked). It installs what the student kit needs (the kit's own tools/setup.sh:
# Debian 12's LibTorch, OpenBLAS, Gloo, Open MPI, Bazel, ...), makes the unprivileged user that
# student code runs as (grading/jail.h), and builds every task's :student binary once with the
# stubs, so a grading compiles only the submitted files (from this build's disk cache, which
# student code sees read-only).
# Debian 12 only so far: see docs/instructor.md, "On Gradescope".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/kit/tools/setup.sh"
if ! getent passwd distlm-student >/dev/null; then
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin distlm-student
fi
# The grader and the binaries it compares with: root's alone (student code runs as another user).
chmod -R go-rwx "$here/grader"
cd "$here/kit"
bazel build //part1_single:student //task2a:student //task2b:student //task3:student //task5:student //tools:launch
bazel shutdown
