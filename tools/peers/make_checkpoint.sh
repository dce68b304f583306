#!/usr/bin/env bash
# tools/peers/make_checkpoint.sh OUT_DIR --preset=tiny|mid|base [--seed=N] [--vocab=PATH]
#   [--train_tsv=PATH] [--do_lower_case=0|1]: a randomly initialised HuggingFace BERT folder
#   (see make_checkpoint.py).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: tools/peers/make_checkpoint.sh OUT_DIR --preset=tiny|mid|base [--seed=N ...]" >&2
  exit 2
fi
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
python=$("$here/setup.sh" | tail -1)
exec "$python" "$here/make_checkpoint.py" "$@"
