#!/usr/bin/env bash
# tools/peers/hf_tokenize.sh VOCAB RTE_DIR OUT_DIR [--reference_dir=DIR]: every RTE train+dev
# pair through transformers' Rust BERT tokenizer, cased and uncased, max_length 128 and 48,
# checked against its Python tokenizer (see hf_tokenize.py).
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: tools/peers/hf_tokenize.sh VOCAB RTE_DIR OUT_DIR [--reference_dir=DIR]" >&2
  exit 2
fi
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
python=$("$here/setup.sh" | tail -1)
exec "$python" "$here/hf_tokenize.py" "$@"
