#!/usr/bin/env bash
# tools/peers/hf_dump.sh MODEL_DIR OUT_DIR [hf_dump.py flags]: what HuggingFace transformers
# computes for that BERT folder (see hf_dump.py), written to OUT_DIR.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: tools/peers/hf_dump.sh MODEL_DIR OUT_DIR [--steps=N ...]" >&2
  exit 2
fi
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
for f in config.json vocab.txt model.safetensors data/train.tsv; do
  if [ ! -f "$1/$f" ]; then echo "tools/peers/hf_dump.sh: $1/$f: no such file" >&2; exit 2; fi
done
python=$("$here/setup.sh" | tail -1)
exec "$python" "$here/hf_dump.py" "$@"
