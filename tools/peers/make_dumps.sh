#!/usr/bin/env bash
# tools/peers/make_dumps.sh [OUT_ROOT]: what the transformers parity tests read, made once.
#   OUT_ROOT/dumps/tiny     hf_dump of ../shared/reference/bert_tiny_reference
#   OUT_ROOT/models/base    a BERT-base-shaped random checkpoint (make_checkpoint.sh --preset=base)
#   OUT_ROOT/dumps/base     hf_dump of it (its data/train.tsv is the real RTE train split)
#   OUT_ROOT/tokenizer      BertTokenizerFast's features of every RTE pair (hf_tokenize.sh)
#   OUT_ROOT/finetune/tiny  hf_finetune.py: 20 updates of the tiny reference checkpoint on the real
#                           RTE, dropout off, lr 1e-3 (part1:hf_finetune_parity_test)
#   OUT_ROOT/vit/tiny       hf_vit_dump.py: a tiny random ViT, its logits, gradients and a 12-update
#                           trace (common/parity:vit_hf_parity_test)
# OUT_ROOT defaults to $DISTLM_PEERS_DIR, else ~/.cache/distlm/peers-out. Each part is redone only
# when the programs that make it changed (a stamp of their hashes). Needs PyPI the first time
# (tools/peers/setup.sh) and ../shared/reference; prints OUT_ROOT on its last line. Point the tests
# at it with DISTLM_PEERS_DIR=OUT_ROOT (./distlm test uses the default location by itself).
set -euo pipefail
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
repo=$(cd "$here/../.." && pwd)
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
root=${1:-${DISTLM_PEERS_DIR:-${DISTLM_CACHE:-$home/.cache/distlm}/peers-out}}
looked_in=${DISTLM_SHARED_DIR:-$repo/../shared}/reference
shared=$looked_in
[ -d "$shared" ] || shared=${DISTLM_SHARED_DIR:-}
if [ ! -f "$shared/README.md" ]; then
  # Name where it looked: a checkout cloned away from ../shared says so, not an empty path.
  echo "tools/peers/make_dumps.sh: no reference data in $looked_in${DISTLM_SHARED_DIR:+ or $DISTLM_SHARED_DIR} (set DISTLM_SHARED_DIR to the folder holding reference/)" >&2
  exit 2
fi
mkdir -p "$root/dumps" "$root/models"
python=$("$here/setup.sh" | tail -1)
# The inputs' paths are part of the stamp: a dump records where its model was (meta.json's
# model_dir), so a checkout or shared folder that moved must remake it, not reuse it.
stamp_of() { { printf '%s\n' "$@"; cat "$@"; } | sha256sum | cut -c1-16; }

# make NAME STAMP_FILES... -- COMMAND...: runs COMMAND unless OUT_ROOT/NAME/.stamp matches.
make_part() {
  local name=$1; shift
  local files=()
  while [ "$1" != "--" ]; do files+=("$1"); shift; done
  shift
  local want
  want=$(stamp_of "${files[@]}")
  if [ -f "$root/$name/.stamp" ] && [ "$(cat "$root/$name/.stamp")" = "$want" ]; then
    echo "make_dumps: $name up to date" >&2
    return
  fi
  rm -rf "$root/$name"
  local t0=$SECONDS
  "$@" >&2
  echo "$want" >"$root/$name/.stamp"
  echo "make_dumps: $name made in $((SECONDS - t0)) s" >&2
}

make_part dumps/tiny "$here/hf_dump.py" "$shared/bert_tiny_reference/model.safetensors" -- \
  "$python" "$here/hf_dump.py" "$shared/bert_tiny_reference" "$root/dumps/tiny"
make_part models/base "$here/make_checkpoint.py" -- \
  "$python" "$here/make_checkpoint.py" "$root/models/base" --preset=base \
  --vocab="$shared/vocab/bert-base-uncased-vocab.txt" --train_tsv="$shared/data/RTE/train.tsv"
make_part dumps/base "$here/hf_dump.py" "$root/models/base/.stamp" -- \
  "$python" "$here/hf_dump.py" "$root/models/base" "$root/dumps/base"
make_part tokenizer "$here/hf_tokenize.py" -- \
  "$python" "$here/hf_tokenize.py" "$shared/vocab/bert-base-uncased-vocab.txt" "$shared/data/RTE" "$root/tokenizer"
make_part finetune/tiny "$here/hf_finetune.py" "$shared/bert_tiny_reference/model.safetensors" -- \
  "$python" "$here/hf_finetune.py" --model="$shared/bert_tiny_reference" --data_dir="$shared/data/RTE" \
  --out="$root/finetune/tiny" --dropout=0 --max_steps=20 --lr=1e-3 --no_eval
make_part vit/tiny "$here/hf_vit_dump.py" -- \
  "$python" "$here/hf_vit_dump.py" "$root/vit/tiny"
echo "$root"
