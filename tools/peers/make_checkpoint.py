"""Writes a randomly initialised HuggingFace BERT folder, for parity tests and benchmarks.

    python make_checkpoint.py OUT_DIR --preset=tiny|mid|base   (make_checkpoint.sh sets up the env)

OUT_DIR receives what hf_dump.py and distlm's --model_name_or_path read:
  config.json, model.safetensors   BertForSequenceClassification (2 labels) as transformers
                                   initialises it under torch.manual_seed(--seed)
  vocab.txt                        a copy of --vocab; config's vocab_size is its line count
  data/train.tsv                   a copy of --train_tsv (GLUE RTE layout)
  tokenizer_config.json            only with an explicit --do_lower_case (see below)
Presets: tiny is common/bert's TinyBertConfig (hidden 128, 2 layers, 2 heads, intermediate
512); mid is hidden 384, 6 layers, 6 heads, intermediate 1536; base is bert-base's shape
(hidden 768, 12 layers, 12 heads, intermediate 3072). All: exact GELU, 512 positions, 2 token
types, LayerNorm eps 1e-12, dropout 0.1.
The folder appears whole or not at all: it is built in OUT_DIR.partial and renamed.
"""
import argparse
import json
import os
import shutil
import sys

import torch
import transformers
from transformers import BertConfig, BertForSequenceClassification

transformers.utils.logging.disable_progress_bar()  # one summary line per program, no bars

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_common import PRESETS  # noqa: E402  (sibling module)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(os.path.dirname(REPO), "shared", "reference")


def bert_config(preset, vocab_size, dropout=0.1, **kwargs):
    """The HuggingFace config of a preset; hf_step_time.py and ddp_step_time.py use it too."""
    hidden, layers, heads, inter = PRESETS[preset]
    return BertConfig(
        vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=heads, intermediate_size=inter, hidden_act="gelu",
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
        max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02,
        layer_norm_eps=1e-12, num_labels=2, **kwargs)


def count_lines(path):
    # The same count distlm's Vocab::Load and transformers' load_vocab arrive at: one token a line.
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--preset", choices=sorted(PRESETS), required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", default=os.path.join(SHARED, "vocab", "bert-base-uncased-vocab.txt"))
    ap.add_argument("--train_tsv", default=os.path.join(SHARED, "data", "RTE", "train.tsv"))
    ap.add_argument("--do_lower_case", type=int, choices=[0, 1], default=None,
                    help="record the casing in tokenizer_config.json (omitted: no such file)")
    a = ap.parse_args()
    for path in (a.vocab, a.train_tsv):
        if not os.path.isfile(path):
            print(f"make_checkpoint: {path}: no such file", file=sys.stderr)
            sys.exit(2)
    out = os.path.abspath(a.out_dir.rstrip("/"))
    if os.path.exists(out):
        # Never replace a folder someone may be reading; the caller removes it on purpose.
        print(f"make_checkpoint: {out} already exists", file=sys.stderr)
        sys.exit(2)
    partial = out + ".partial"
    shutil.rmtree(partial, ignore_errors=True)  # a previous run that died half-way
    os.makedirs(os.path.join(partial, "data"))

    vocab_size = count_lines(a.vocab)
    torch.manual_seed(a.seed)
    model = BertForSequenceClassification(bert_config(a.preset, vocab_size))
    model.save_pretrained(partial, safe_serialization=True)
    shutil.copyfile(a.vocab, os.path.join(partial, "vocab.txt"))
    shutil.copyfile(a.train_tsv, os.path.join(partial, "data", "train.tsv"))
    if a.do_lower_case is not None:
        # Not needed for loading: BertTokenizerFast.from_pretrained works from vocab.txt alone
        # and takes do_lower_case as an argument. Written so a loader that passes nothing
        # (AutoTokenizer) gets the casing this folder was made for, as on the Hub.
        with open(os.path.join(partial, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "BertTokenizer", "do_lower_case": bool(a.do_lower_case)}, f, indent=2)
            f.write("\n")
    # safetensors writes through a private temporary file (mode 0600); give the folder's
    # files the modes the rest of it has, so other users' jobs can read the checkpoint.
    mask = os.umask(0)
    os.umask(mask)
    for root, _, files in os.walk(partial):
        for name in files:
            os.chmod(os.path.join(root, name), 0o666 & ~mask)
    os.rename(partial, out)
    n = sum(p.numel() for p in model.parameters())
    print(f"make_checkpoint: {a.preset} (vocab {vocab_size}, {n / 1e6:.1f}M parameters, seed {a.seed}, "
          f"transformers {transformers.__version__}); wrote {out}")


if __name__ == "__main__":
    main()
