#!/usr/bin/env bash
# Installs LibTorch 2.x from PyPI's `torch` wheel into a cache outside the checkout and prints
# the LibTorch root (the folder holding include/ and lib/) on its last line, for DISTLM_LIBTORCH:
#
#   DISTLM_LIBTORCH=$(tools/torch_wheel.sh 2.11.0 | tail -1) bazel build //...
#   DISTLM_TORCH_WHEEL=2.11.0 ./distlm test          # the same, done by ./distlm
#
# The wheel is the complete C++ LibTorch (PyPI's Linux wheel is the CUDA build); its CUDA,
# cuDNN and NCCL libraries come as the wheels it depends on (nvidia-*), laid out beside it in
# site-packages so that its own RPATH ($ORIGIN/../../nvidia/...) finds them. Nothing of Python
# is used. The cache is ${DISTLM_CACHE:-~/.cache/distlm}/torch-VERSION (about 4.5 GB for
# 2.11.0, 80 s to install here); a second call finds it and returns at once.
set -euo pipefail

version=${1:-}
if ! [[ "$version" =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?$ ]]; then
  echo "tools/torch_wheel.sh: usage: tools/torch_wheel.sh VERSION (e.g. 2.11.0); got '${version}'" >&2
  exit 2
fi
major=${version%%.*}
if [ "$major" -lt 2 ]; then
  echo "tools/torch_wheel.sh: torch $version: the wheel line starts at 2.0 (1.13 is Debian's libtorch-dev, the default)" >&2
  exit 2
fi

cache=${DISTLM_CACHE:-$HOME/.cache/distlm}
site="$cache/torch-$version"
root="$site/torch"

python=${PYTHON:-python3}

# The wheel's CUDA runtime headers (nvidia/cuXX/include) lack two folders that LibTorch's
# CUDA headers reach: crt/ (cuda_runtime.h includes crt/host_config.h) and nv/ (cuda_fp16.h
# includes CCCL's nv/target). NVIDIA publishes them as the wheels nvidia-cuda-crt and
# nvidia-cuda-cccl; they go into the same include folder, at the wheel's CUDA version. (Machines
# with the CUDA toolkit in /usr/local/include hid this: a build elsewhere failed.)
add_cuda_headers() {
  local site=$1 cuda major inc extra
  cuda=$(sed -n 's/.*; CUDA \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' "$site/distlm_torch_wheel.txt")
  [ -n "$cuda" ] || return 0  # a CPU build
  major=${cuda%%.*}
  inc=$site/nvidia/cu$major/include
  [ -f "$inc/crt/host_config.h" ] && [ -f "$inc/nv/target" ] && return 0
  if [ "$major" -lt 13 ] || [ ! -d "$inc" ]; then
    echo "tools/torch_wheel.sh: warning: CUDA $cuda: no crt/ and nv/ headers added (done for CUDA 13 wheels only); a build may need the CUDA toolkit's" >&2
    return 0
  fi
  extra=$(mktemp -d "$site.headers.XXXXXX")
  if ! PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore "$python" -m pip install --quiet --no-compile --no-deps --target "$extra" \
      "nvidia-cuda-crt==$cuda.*" "nvidia-cuda-cccl==$cuda.*" >&2; then
    rm -rf "$extra"
    echo "tools/torch_wheel.sh: pip could not install nvidia-cuda-crt and nvidia-cuda-cccl $cuda.* (CUDA headers the build needs)" >&2
    return 1
  fi
  cp -a "$extra/nvidia/cu$major/include/." "$inc/"
  rm -rf "$extra"
  echo "tools/torch_wheel.sh: added CUDA $cuda's crt/ and nv/ headers to $inc" >&2
}

if [ ! -f "$site/.complete" ]; then
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "tools/torch_wheel.sh: needs pip ($python -m pip); on Debian: apt-get install python3-pip" >&2
    exit 1
  fi
  mkdir -p "$cache"
  tmp="$site.partial.$$"
  trap 'rm -rf "$tmp"' EXIT
  echo "tools/torch_wheel.sh: installing torch==$version and its CUDA libraries into $site" >&2
  start=$(date +%s)
  # --target: a plain folder, no virtual environment, nothing of the system's Python touched.
  # --no-compile: no .pyc files; only the C++ libraries are used.
  if ! PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore "$python" -m pip install --quiet --no-compile \
      --target "$tmp" "torch==$version" >&2; then
    echo "tools/torch_wheel.sh: pip could not install torch==$version (is PyPI reachable? is $version a torch release?)" >&2
    exit 1
  fi
  if [ ! -f "$tmp/torch/include/torch/csrc/api/include/torch/torch.h" ] || [ ! -f "$tmp/torch/lib/libtorch.so" ]; then
    echo "tools/torch_wheel.sh: torch==$version installed, but it has no C++ LibTorch (torch/include, torch/lib/libtorch.so)" >&2
    exit 1
  fi
  # The wheel's own record of what it is, for the build's and the tests' reports.
  "$python" - "$tmp" "$version" >"$tmp/distlm_torch_wheel.txt" <<'EOF'
import re, sys, pathlib
site, version = pathlib.Path(sys.argv[1]), sys.argv[2]
text = (site / "torch" / "version.py").read_text()
full = re.search(r"__version__ = '([^']+)'", text).group(1)
cuda = re.search(r"cuda: Optional\[str\] = '?([^'\n]+)'?", text)
print(f"torch=={version} ({full}); CUDA {cuda.group(1) if cuda else 'none'}")
EOF
  add_cuda_headers "$tmp" || exit 1
  rm -rf "$site"
  mv "$tmp" "$site"
  trap - EXIT
  touch "$site/.complete"
  echo "tools/torch_wheel.sh: installed in $(( $(date +%s) - start )) s: $(cat "$site/distlm_torch_wheel.txt")" >&2
fi
# A cache made before the headers were added gets them now.
add_cuda_headers "$site" || exit 1
echo "$root"
