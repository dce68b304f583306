#!/usr/bin/env bash
# The 2019 peer on distlm's default LibTorch: Debian's python3-torch (1.13.1, the same libtorch
# and OpenBLAS as libtorch-dev) and pytorch_transformers 1.2.0 (the library the project's
# reference values come from) in a virtual environment in the cache that sees the system's
# torch. Prints the environment's python on its last line. Benchmarks only (and
# //tools/peers:smoke_test).
set -euo pipefail
# The cache in the user's home also where HOME is unset (a Bazel test).
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
cache=${DISTLM_CACHE:-$home/.cache/distlm}
venv="$cache/peers-torch1.13-pytorch_transformers1.2.0"
# Debian's interpreter by path: a python3 earlier on PATH (pyenv, a venv) does not see Debian's torch.
python=/usr/bin/python3
if ! "$python" -c 'import torch' 2>/dev/null; then
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "tools/peers/setup_legacy.sh: installing Debian's python3-torch" >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q python3-torch >&2
fi
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  "$python" -m venv --system-site-packages "$venv"
  # --no-deps: its torch requirement must stay Debian's, not a wheel from PyPI. It imports boto3,
  # requests, regex, sentencepiece, sacremoses and tqdm at start-up (the timing uses none).
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install --quiet --no-deps pytorch_transformers==1.2.0 >&2
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install --quiet boto3 requests regex sentencepiece \
    sacremoses tqdm >&2
  "$venv/bin/python" -c 'import torch, pytorch_transformers as p; print("torch", torch.__version__, "pytorch_transformers", p.__version__)' >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
