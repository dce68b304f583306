#!/usr/bin/env bash
# The container route end to end (tools/container/run.sh): the image built from
# tools/container/Dockerfile, then `./distlm run` inside it on a copy of this checkout's files
# (a cold build of part 1 and a training run of the built-in sample), as a user on Ubuntu or
# macOS would start. Long (minutes: the image, then a cold build): tagged manual; run it with
#   bazel test //tools/container:container_test          (or tools/container/container_test.sh)
# With neither a Docker daemon nor a Podman that can run a container it says SKIPPED and passes.
# DISTLM_CONTAINER_FLAGS / DISTLM_CONTAINER_RUN_FLAGS pass through (run.sh explains them).
set -uo pipefail
if [[ -n ${TEST_SRCDIR:-} ]]; then
  here=$TEST_SRCDIR/${TEST_WORKSPACE:-distlm}/tools/container
else
  here=$(cd "$(dirname "$0")" && pwd)
fi
# The checkout itself (the test copies its tracked files): runfiles hold links into it.
checkout=$(cd "$(dirname "$(readlink -f "$here/run.sh")")/../.." && pwd)
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/container_test.XXXXXX")

engine=
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  engine=docker
elif command -v podman >/dev/null; then
  engine=podman
fi
if [ -z "$engine" ]; then
  echo "SKIPPED: tools/container/container_test: no Docker daemon and no Podman: the container route was NOT tested"
  exit 0
fi

# A copy of the tracked files (with this checkout's uncommitted changes), so that the
# container's Bazel writes its links there and not into this checkout.
(cd "$checkout" && git ls-files -z | tar --null -T - -c) | tar -C "$work" -x || {
  echo "FAILED: could not copy the checkout"
  exit 1
}
start=$(date +%s)
DISTLM_CONTAINER_ENGINE=$engine timeout 3000 bash "$work/tools/container/run.sh" \
  ./distlm run --max_steps=3 --do_eval=false --plots=false --output_dir=/distlm/run_out >"$work/run.log" 2>&1
status=$?
secs=$(($(date +%s) - start))
if [ "$status" -ne 0 ] || ! grep -q "mean iteration time" "$work/run.log" || [ ! -s "$work/run_out/train_log.jsonl" ]; then
  tail -n 30 "$work/run.log"
  echo "FAILED: ./distlm run in the container ($engine) exited $status after $secs s"
  exit 1
fi
grep -h "mean iteration time\|^part1:" "$work/run.log" | head -3
echo "OK: ./distlm run in the Debian 12 container ($engine): $(wc -l <"$work/run_out/train_log.jsonl") updates, $secs s in all (image build, if any, and a cold build included)"
