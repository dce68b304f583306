#!/usr/bin/env bash
# Runs a command in a Debian 12 container (tools/container/Dockerfile) with this checkout at
# /distlm: the route for hosts that are not Debian 12 (Ubuntu, macOS with Docker Desktop, ...).
#
#   tools/container/run.sh                      # a shell; then ./distlm run, ./distlm test, bazel ...
#   tools/container/run.sh ./distlm run         # one command
#   tools/container/run.sh --rebuild ...        # build the image again (after tools/setup.sh changed)
#
# Docker if its daemon answers, else Podman (DISTLM_CONTAINER_ENGINE=docker|podman picks). The
# image is built on first use (distlm-dev: Debian 12 plus tools/setup.sh's packages, about 1.5 GB).
# Bazel's caches live in the volume distlm-cache (kept between runs). --network=host, so that
# ranks in containers on several machines reach each other as the handout's cluster runs do.
# Extra engine flags: DISTLM_CONTAINER_FLAGS (global, e.g. "--runtime runc") and
# DISTLM_CONTAINER_RUN_FLAGS (for run and build).
set -euo pipefail
checkout=$(cd "$(dirname "$0")/../.." && pwd)
image=${DISTLM_CONTAINER_IMAGE:-distlm-dev}

rebuild=0
if [ "${1:-}" = --rebuild ]; then
  rebuild=1
  shift
fi

engine=${DISTLM_CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    engine=docker
  elif command -v podman >/dev/null; then
    engine=podman
  else
    echo "tools/container/run.sh: neither a Docker daemon nor Podman here; install one (docs/handout/README.md, \"Other systems\")" >&2
    exit 1
  fi
fi
# shellcheck disable=SC2206  # flags are words
global=(${DISTLM_CONTAINER_FLAGS:-})
# shellcheck disable=SC2206
extra=(${DISTLM_CONTAINER_RUN_FLAGS:-})

# Podman's defaults (crun, systemd cgroups, raising the open-files and process limits) fail in
# some VMs and containers (the course's build machine: hybrid cgroups, fixed hard limits); runc
# with cgroupfs and the current limits work there. Used when the defaults cannot start debian:12.
if [ "$engine" = podman ] && [ -z "${DISTLM_CONTAINER_FLAGS:-}" ] &&
  ! podman run --rm --network=host debian:12 true >/dev/null 2>&1 && command -v runc >/dev/null; then
  global=(--runtime runc --cgroup-manager cgroupfs)
  extra+=(--ulimit "nofile=$(ulimit -n):$(ulimit -Hn)" --ulimit nproc=4096:4096)
  echo "tools/container/run.sh: podman's defaults cannot start a container here; using runc and cgroupfs" >&2
fi

if [ "$rebuild" -eq 1 ] || ! "$engine" "${global[@]}" image inspect "$image" >/dev/null 2>&1; then
  echo "tools/container/run.sh: building $image with $engine (tools/setup.sh's packages; minutes, once)" >&2
  "$engine" "${global[@]}" build --network=host "${extra[@]}" -t "$image" -f "$checkout/tools/container/Dockerfile" \
    "$checkout/tools" >&2
fi

tty=()
[ -t 0 ] && [ -t 1 ] && tty=(-it)
[ $# -gt 0 ] || set -- bash
exec "$engine" "${global[@]}" run --rm "${tty[@]}" --network=host "${extra[@]}" \
  -v "$checkout":/distlm -v distlm-cache:/root/.cache -w /distlm "$image" "$@"
