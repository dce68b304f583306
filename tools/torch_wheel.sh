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

if [ ! -f "$site/.complete" ]; then
  python=${PYTHON:-python3}
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
  if ! PIP_DISABLE_PIP_VERSION_CHECK=1 "$python" -m pip install --quiet --no-compile \
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
  rm -rf "$site"
  mv "$tmp" "$site"
  trap - EXIT
  touch "$site/.complete"
  echo "tools/torch_wheel.sh: installed in $(( $(date +%s) - start )) s: $(cat "$site/distlm_torch_wheel.txt")" >&2
fi
echo "$root"
