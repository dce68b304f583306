#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder's image, from /autograder/source
# (this zip, unpacked). It installs what the student kit needs (the kit's own tools/setup.sh:
# OpenBLAS, Open MPI, Bazel, ... and LibTorch), makes the unprivileged user that student code
# runs as (grading/jail/jail.h), and builds every task's :student binary once with the stubs, so a
# grading compiles only the submitted files (from this build's disk cache, which student code
# sees read-only).
#
# LibTorch is the one the grader was linked against (grader/libtorch.env, written by
# //grading:gradescope_package): Debian 12's libtorch-dev, or PyPI's `torch` wheel, installed
# here in /opt/distlm (outside root's home, which the jail hides from student code).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=/dev/null
. "$here/grader/libtorch.env"
if [ -n "${DISTLM_TORCH_WHEEL:-}" ]; then
  # Tells the kit's setup to skip Debian's libtorch-dev.
  export DISTLM_LIBTORCH=/opt/distlm/torch-$DISTLM_TORCH_WHEEL/torch
fi
bash "$here/kit/tools/setup.sh"
if [ -n "${DISTLM_TORCH_WHEEL:-}" ]; then
  DISTLM_CACHE=/opt/distlm bash "$here/kit/tools/torch_wheel.sh" "$DISTLM_TORCH_WHEEL" >/dev/null
  chmod -R go+rX /opt/distlm
fi
if ! getent passwd distlm-student >/dev/null; then
  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin distlm-student
fi
# The grader and the binaries it compares with: root's alone (student code runs as another user).
chmod -R go-rwx "$here/grader"
cd "$here/kit"
# As the grader's builds run (grading/kit_build.cc): no LD_LIBRARY_PATH, which Bazel's action keys hold.
env -u LD_LIBRARY_PATH bazel build //part1:student //task2a:student //task2b:student //task3:student //task5:student //tools:launch
bazel shutdown
