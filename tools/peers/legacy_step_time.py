"""Times pytorch_transformers 1.2.0's BertForSequenceClassification the way //part1:bench does,
on Debian's torch 1.13 (the LibTorch of distlm's default line).

    python legacy_step_time.py --model=tiny --batch_size=32 --seq_len=128 --threads=2 --steps=10
    (tools/peers/setup_legacy.sh makes the environment)

The 2019 library the project's reference numbers come from, on the same torch, BLAS and threads
as distlm's default build: the same random batch and step as hf_step_time.py (forward with
labels, backward, clip_grad_norm_(1.0), the library's own AdamW with bias correction, lr 5e-5,
eps 1e-8, zero_grad), eager attention (the only kind it has), dropout on. Prints a line per step
and last one JSON line {"impl": "pytorch_transformers", "ms_per_step": ...}.
"""
import argparse
import json
import os
import sys
import warnings

import torch
import pytorch_transformers
from pytorch_transformers import AdamW, BertConfig, BertForSequenceClassification

# The library's AdamW calls add_(scalar, tensor), deprecated since torch 1.5: one warning per run.
warnings.filterwarnings("ignore", message="This overload of add_ is deprecated")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_common import PRESETS, VOCAB, forward_flops, median, random_batch, step_line, timed_step  # noqa: E402  (sibling module)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(VOCAB), default="tiny")
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--seq_len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--dropout", type=float, default=0.1)
    a = ap.parse_args()
    if a.batch_size < 1 or not 3 <= a.seq_len <= 512 or a.steps < 1 or a.threads < 1:
        ap.error("need --batch_size >= 1, 3 <= --seq_len <= 512, --steps >= 1, --threads >= 1")
    torch.set_num_threads(a.threads)
    hidden, layers, heads, inter = PRESETS[a.model]
    vocab = VOCAB[a.model]
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size_or_config_json_file=vocab, hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=inter, hidden_act="gelu",
                     hidden_dropout_prob=a.dropout, attention_probs_dropout_prob=a.dropout,
                     max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12, num_labels=2)
    model = BertForSequenceClassification(cfg)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = AdamW(params, lr=5e-5, eps=1e-8, weight_decay=0.0)
    B, S = a.batch_size, a.seq_len
    ids, seg, mask, labels = random_batch(vocab, B, S)
    ms = []
    for i in range(a.steps + 1):
        parts = timed_step(lambda: model(ids, token_type_ids=seg, attention_mask=mask, labels=labels)[0], params, opt)
        print(step_line(i, parts), flush=True)
        if i > 0:
            ms.append(sum(parts) * 1000)
    med = median(ms)
    flops = 3 * forward_flops(a.model, B, S)
    print(json.dumps({
        "impl": "pytorch_transformers", "attn": "eager", "model": a.model, "batch_size": B, "seq_len": S,
        "threads": torch.get_num_threads(), "ms_per_step": med, "gflops_per_s": flops / (med / 1000) / 1e9,
        "optim": "pytorch_transformers.AdamW", "dropout": a.dropout, "steps": a.steps,
        "torch": torch.__version__, "pytorch_transformers": pytorch_transformers.__version__}))


if __name__ == "__main__":
    main()
