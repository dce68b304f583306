"""Times HuggingFace BertForSequenceClassification training steps the way //part1:bench does.

    python hf_step_time.py --model=tiny --batch_size=32 --seq_len=128 --threads=2 --steps=10
    python hf_step_time.py --model=base --device=cuda --bf16     # bench.cc --device=cuda --bf16

The same run as bench.cc, in transformers on this environment's torch: torch.manual_seed(0),
the model, then random ids randint(1, vocab), token types 0 for the first half and 1 for the
second, mask all ones, random labels; model.train() with dropout. Each step: forward with
labels, loss.backward(), clip_grad_norm_(1.0), torch.optim.AdamW (lr 5e-5, eps 1e-8, weight
decay 0) step, zero_grad(set_to_none=True). One warm-up step excluded; ms_per_step is the
median as bench.cc takes it (the upper middle value when the count is even).
--optim: transformers 5.24's Trainer defaults to "adamw_torch_fused" with torch >= 2.8, i.e.
torch.optim.AdamW(fused=True); "foreach" is torch's own default (multi-tensor), "for_loop"
one parameter at a time, closest to distlm's BertAdamW.
--device=cuda moves the model and batch to the GPU and waits for it before each clock reading;
--bf16 runs the forward pass under torch.autocast(bfloat16), as bench.cc's --bf16 and
transformers' Trainer with bf16=True (the backward follows autocast's casts; the weights,
gradients and AdamW stay float32).
Prints a line per step and last one JSON line {"impl": "transformers", "ms_per_step": ...}.
"""
import argparse
import json
import os
import sys

import torch
import transformers
from transformers import BertForSequenceClassification

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_checkpoint import bert_config  # noqa: E402  (sibling modules)
from step_common import VOCAB, forward_flops, median, random_batch, step_line, timed_step  # noqa: E402,F401  (ddp_step_time imports them from here)

transformers.utils.logging.disable_progress_bar()  # one summary line per program, no bars


def add_flags(ap, models):
    ap.add_argument("--model", choices=models, default="tiny")
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--seq_len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--steps", type=int, default=10, help="timed steps (plus one warm-up step)")
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--optim", choices=["fused", "foreach", "for_loop"], default="fused")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--bf16", action="store_true", help="forward under bfloat16 autocast")


def check_flags(ap, a):
    if a.batch_size < 1 or not 3 <= a.seq_len <= 512 or a.steps < 1 or a.threads < 1:
        ap.error("need --batch_size >= 1, 3 <= --seq_len <= 512, --steps >= 1, --threads >= 1")


def build(a):
    """Model, its parameters, optimizer and the one batch every step reuses (bench.cc's order)."""
    vocab = VOCAB[a.model]
    torch.manual_seed(0)
    cfg = bert_config(a.model, vocab, dropout=a.dropout, attn_implementation=a.attn)
    model = BertForSequenceClassification(cfg)
    # A config transformers could not honour falls back silently in some versions; a timing
    # labelled sdpa must have run sdpa.
    if model.config._attn_implementation != a.attn:
        raise SystemExit(f"asked for attention {a.attn}, model has {model.config._attn_implementation}")
    model.to(a.device)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(params, a.optim)
    ids, seg, mask, labels = random_batch(vocab, a.batch_size, a.seq_len)
    batch = {"input_ids": ids, "token_type_ids": seg, "attention_mask": mask, "labels": labels}
    return model, params, opt, {k: v.to(a.device) for k, v in batch.items()}


def make_optimizer(params, optim):
    """torch.optim.AdamW as --optim names it (lr 5e-5, eps 1e-8, weight decay 0). fsdp_step_time.py
    calls it again after fully_shard, which replaces the parameters the first one was given."""
    kind = {"fused": {"fused": True}, "foreach": {"foreach": True}, "for_loop": {"foreach": False}}[optim]
    return torch.optim.AdamW(params, lr=5e-5, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, **kind)


def train_step(model, params, opt, batch, device="cpu", bf16=False):
    """One step; returns (forward, backward, clip+AdamW+zero) seconds."""
    def loss():
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            return model(**batch).loss
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    return timed_step(loss, params, opt, sync)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_flags(ap, sorted(VOCAB))
    a = ap.parse_args()
    check_flags(ap, a)
    torch.set_num_threads(a.threads)
    model, params, opt, batch = build(a)
    ms, each = [], []
    for i in range(a.steps + 1):
        parts = train_step(model, params, opt, batch, a.device, a.bf16)
        print(step_line(i, parts), flush=True)
        if i > 0:
            ms.append(sum(parts) * 1000)
            each.append([x * 1000 for x in parts])
    med = median(ms)
    flops = 3 * forward_flops(a.model, a.batch_size, a.seq_len)
    print(json.dumps({
        "impl": "transformers", "attn": model.config._attn_implementation, "model": a.model,
        "batch_size": a.batch_size, "seq_len": a.seq_len, "threads": torch.get_num_threads(),
        "ms_per_step": med, **{k: median([p[j] for p in each]) for j, k in
                               enumerate(["forward_ms", "backward_ms", "clip_adamw_zero_ms"])},
        "gflops_per_s": flops / (med / 1000) / 1e9, "optim": a.optim,
        "dropout": a.dropout, "steps": a.steps, "device": a.device, "bf16": a.bf16,
        "torch": torch.__version__, "transformers": transformers.__version__}))


if __name__ == "__main__":
    main()
