#!/usr/bin/env bash
# The peer harness's Python: a virtual environment in the cache, outside the checkout, with
# pinned HuggingFace transformers, tokenizers and safetensors, over the same torch the C++ line
# builds against (tools/torch_wheel.sh's install, put on the path, not installed twice).
# Prints the environment's python on its last line. Needed only by tools/peers and benchmarks,
# never by ./distlm run or ./distlm test.
set -euo pipefail
cd "$(dirname "$0")/../.."

TORCH=${DISTLM_PEERS_TORCH:-2.11.0}
TRANSFORMERS=5.24.0
TOKENIZERS=0.23.3
SAFETENSORS=0.8.0

torch_root=$(tools/torch_wheel.sh "$TORCH" | tail -1)
cache=${DISTLM_CACHE:-$HOME/.cache/distlm}
venv="$cache/peers-torch$TORCH-transformers$TRANSFORMERS"
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  echo "tools/peers/setup.sh: creating $venv" >&2
  python3 -m venv "$venv"
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # torch (and its CUDA libraries) from the wheel's install.
  dirname "$torch_root" >"$site/distlm_torch.pth"
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install --quiet \
    "transformers==$TRANSFORMERS" "tokenizers==$TOKENIZERS" "safetensors==$SAFETENSORS" numpy >&2
  "$venv/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
