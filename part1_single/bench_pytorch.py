#!/usr/bin/env python3
"""Eager Python PyTorch at the shapes of //part1_single:bench, for comparison.

A BERT-for-classification written the way HuggingFace's modeling code computes it (separate
query/key/value products, scores / sqrt(d) + mask, softmax, dropout, exact GELU, LayerNorm,
tanh pooler), timed with the same loop and FLOP count as bench.cc: forward, backward,
clip_grad_norm_, AdamW, zero_grad; median of the steps after a warm-up step.

Needs Debian's python3-torch (the same LibTorch 1.13 as the C++ build):
  apt-get install python3-torch
  python3 part1_single/bench_pytorch.py --model=base --batch_size=8 --steps=3 --num_threads=2
"""
import argparse
import json
import math
import statistics
import time

import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, h, heads, inter, p):
        super().__init__()
        self.heads, self.d, self.p = heads, h // heads, p
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.attn_out, self.ln1 = nn.Linear(h, h), nn.LayerNorm(h, eps=1e-12)
        self.inter, self.out, self.ln2 = nn.Linear(h, inter), nn.Linear(inter, h), nn.LayerNorm(h, eps=1e-12)

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.d).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d) + mask
        probs = nn.functional.dropout(torch.softmax(scores, -1), self.p, self.training)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous().view(x.shape)
        a = self.ln1(nn.functional.dropout(self.attn_out(ctx), self.p, self.training) + x)
        f = self.out(nn.functional.gelu(self.inter(a)))
        return self.ln2(nn.functional.dropout(f, self.p, self.training) + a)


class Bert(nn.Module):
    def __init__(self, vocab, h, layers, heads, inter, p):
        super().__init__()
        self.words, self.pos, self.types = nn.Embedding(vocab, h, padding_idx=0), nn.Embedding(512, h), nn.Embedding(2, h)
        self.ln, self.p = nn.LayerNorm(h, eps=1e-12), p
        self.layers = nn.ModuleList(Layer(h, heads, inter, p) for _ in range(layers))
        self.pooler, self.classifier = nn.Linear(h, h), nn.Linear(h, 2)

    def forward(self, ids, types, mask, labels):
        pos = torch.arange(ids.shape[1])
        x = self.ln(self.words(ids) + self.pos(pos)[None] + self.types(types))
        x = nn.functional.dropout(x, self.p, self.training)
        add = (1.0 - mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, add)
        pooled = nn.functional.dropout(torch.tanh(self.pooler(x[:, 0])), self.p, self.training)
        return nn.functional.cross_entropy(self.classifier(pooled), labels)


def forward_flops(h, inter, layers, b, s):
    t = b * s
    return layers * (t * (2 * 4 * h * h + 2 * 2 * h * inter) + b * 2.0 * 2 * s * s * h) + b * (2 * h * h + 2 * h * 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["tiny", "base"], default="tiny")
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--seq_len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--num_threads", type=int, default=1)
    ap.add_argument("--dropout", type=float, default=0.1)
    a = ap.parse_args()
    torch.set_num_threads(a.num_threads)
    torch.manual_seed(0)
    vocab, h, layers, heads, inter = (30522, 128, 2, 2, 512) if a.model == "tiny" else (28996, 768, 12, 12, 3072)
    model = Bert(vocab, h, layers, heads, inter, a.dropout).train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, eps=1e-8, weight_decay=0.0)
    b, s = a.batch_size, a.seq_len
    ids = torch.randint(1, vocab, (b, s))
    types = torch.cat([torch.zeros(b, s // 2, dtype=torch.long), torch.ones(b, s - s // 2, dtype=torch.long)], 1)
    mask = torch.ones(b, s, dtype=torch.long)
    labels = torch.randint(0, 2, (b,))
    times = []
    for i in range(a.steps + 1):
        t0 = time.perf_counter()
        loss = model(ids, types, mask, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        ms = (time.perf_counter() - t0) * 1000
        print(f"step {i}: {ms:.1f} ms" + (" (warm-up, excluded)" if i == 0 else ""))
        if i > 0:
            times.append(ms)
    med = statistics.median(times)
    flops = 3 * forward_flops(h, inter, layers, b, s)
    print(json.dumps({"impl": "python-eager", "model": a.model, "batch_size": b, "seq_len": s,
                      "threads": a.num_threads, "ms_per_step": med, "gflops_per_s": flops / (med / 1000) / 1e9}))


if __name__ == "__main__":
    main()
