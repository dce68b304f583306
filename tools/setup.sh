#!/usr/bin/env bash
# Installs every Debian package that building, testing and running distlm needs.
# Idempotent: packages already present are skipped, so a second run takes seconds.
# Works as root or through sudo. Prints one line per step (what, how long); apt's and dpkg's
# own output goes to a log it names ($DISTLM_SETUP_LOG, by default
# ~/.cache/distlm/setup.log), whose tail it prints only when a step fails.
set -euo pipefail

log=${DISTLM_SETUP_LOG:-${DISTLM_CACHE:-$HOME/.cache/distlm}/setup.log}
mkdir -p "$(dirname "$log")"
# step NAME CMD...: runs CMD with its output appended to the log; one line with the time taken,
# or the log's tail and a non-zero exit when it fails.
step() {
  local name=$1 t0 rc=0
  shift
  t0=$(date +%s)
  echo "=== $(date -u +%FT%TZ) $name: $*" >>"$log"
  "$@" >>"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "tools/setup.sh: $name FAILED (exit $rc) after $(( $(date +%s) - t0 )) s; the end of $log:" >&2
    tail -n 25 "$log" >&2
    exit "$rc"
  fi
  echo "tools/setup.sh: $name ($(( $(date +%s) - t0 )) s)"
}

if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
  echo "tools/setup.sh: this system has no apt-get/dpkg; distlm's set-up needs Debian 12 (bookworm) or a derivative" >&2
  exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "tools/setup.sh: not root and no sudo; run it as root or install sudo" >&2
  exit 1
fi

PACKAGES=(
  # build
  bazel-bootstrap g++ git zip unzip
  # LibTorch (CPU, with c10d and Gloo) and a fast BLAS for it: OpenBLAS's OpenMP build, which
  # shares LibTorch's OpenMP threads (see below)
  libtorch-dev libopenblas0-openmp libgloo-dev
  # the grader's seccomp filter (grading/no_spawn.cc; linked statically)
  libseccomp-dev
  # TensorBoard's event messages (common/tensorboard: protoc, the static lite runtime)
  libprotobuf-dev protobuf-compiler
  # MPI backend
  libopenmpi-dev openmpi-bin
  # libraries the code uses
  libabsl-dev nlohmann-json3-dev libutf8proc-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # fuzzing (libFuzzer from clang's runtime)
  clang-14 libclang-rt-14-dev
  # emulated cluster (network namespaces, tc), plots
  iproute2 gnuplot-nox python3
  # the emulated cluster's delay where the kernel has no netem (task4_bench/cluster/delay_holder:
  # packets held in user space through an iptables NFQUEUE rule)
  libnetfilter-queue-dev iptables
  # LibTorch 2.x from PyPI's torch wheel (tools/torch_wheel.sh) and the transformers peers
  # (tools/peers/setup.sh: a virtual environment)
  python3-pip python3-venv
)

# DISTLM_WITH_SLURM=1: Slurm's daemons and client, for tools/slurm (a one-node cluster on
# loopback, and the test that runs task 2b under srun and sbatch). Not by default: on a machine
# with systemd, Debian enables the daemons' services when it installs them.
if [ "${DISTLM_WITH_SLURM:-0}" = 1 ]; then
  PACKAGES+=(slurmctld slurmd slurm-client)
fi

# DISTLM_WITH_BROWSER=1: Debian's Chromium, for //tools/peers:tensorboard_test's look at
# TensorBoard's page (headless; .ci/run sets it). Not by default: about 100 MB that neither
# `./distlm run` nor the other tests need, and the test says SKIPPED for that step without it.
if [ "${DISTLM_WITH_BROWSER:-0}" = 1 ]; then
  PACKAGES+=(chromium)
fi

# With DISTLM_LIBTORCH set (LibTorch 2.x from the torch wheel: tools/torch_wheel.sh), Debian's
# LibTorch 1.13 is not needed. libgloo-dev still is: the wheel links Gloo into libtorch_cpu but
# ships none of its headers, which c10d's ProcessGroupGloo.hpp includes.
if [ -n "${DISTLM_LIBTORCH:-}" ]; then
  kept=()
  for p in "${PACKAGES[@]}"; do
    [ "$p" = libtorch-dev ] || kept+=("$p")
  done
  PACKAGES=("${kept[@]}")
  echo "tools/setup.sh: DISTLM_LIBTORCH=$DISTLM_LIBTORCH: Debian's libtorch-dev skipped"
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "tools/setup.sh: installing ${#missing[@]} package(s): ${missing[*]} (apt's output: $log)"
  export DEBIAN_FRONTEND=noninteractive
  step "apt-get update" "${SUDO[@]}" apt-get update
  step "apt-get install ${#missing[@]} package(s)" \
    "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "tools/setup.sh: all ${#PACKAGES[@]} packages already installed"
fi

# LibTorch links libblas.so.3 and libopenblas.so.0; without OpenBLAS as the active alternative
# it falls back to the reference BLAS, about 27x slower on matrix products. All three
# alternatives must name the same build, or two OpenBLAS builds end up in one process.
# The OpenMP build of OpenBLAS, not the pthread one: LibTorch's element-wise operators run on
# OpenMP threads, and the pthread build's own workers, still spinning after a matrix product,
# held the cores those threads needed (each product followed by an element-wise operator cost
# ~7 ms more; a BERT-base step on 2 threads took 5.4 s instead of 3.6 s).
arch_dir=/usr/lib/x86_64-linux-gnu
if [ -d /usr/lib/aarch64-linux-gnu ] && [ ! -d "$arch_dir" ]; then arch_dir=/usr/lib/aarch64-linux-gnu; fi
for lib in libblas.so.3 liblapack.so.3 libopenblas.so.0; do
  alt="${lib}-$(basename "$(dirname "$arch_dir/x")")"
  target="$arch_dir/openblas-openmp/$lib"
  if [ -e "$target" ] && update-alternatives --query "$alt" >/dev/null 2>&1; then
    current=$(update-alternatives --query "$alt" | awk '/^Value:/{print $2}')
    if [ "$current" != "$target" ]; then
      step "$lib -> OpenBLAS, OpenMP build ($target)" \
        "${SUDO[@]}" update-alternatives --set "$alt" "$target"
    fi
  fi
done
echo "tools/setup.sh: ready"
