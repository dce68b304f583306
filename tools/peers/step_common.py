"""What the step timers share and that needs neither transformers nor a torch version: model
shapes, bench.cc's FLOP count, its median and its per-step line."""

PRESETS = {
    # name: (hidden, layers, heads, intermediate)
    "tiny": (128, 2, 2, 512),
    "mid": (384, 6, 6, 1536),
    "base": (768, 12, 12, 3072),
}

# bench.cc: tiny uses bert-base-uncased's vocabulary size, base bert-base-cased's.
VOCAB = {"tiny": 30522, "mid": 30522, "base": 28996}


def step_line(i, parts, total=None, what=""):
    f, b, o = (x * 1000 for x in parts)
    total = f + b + o if total is None else total * 1000
    return (f"step {i}: {total:.1f} ms ({what}forward {f:.1f}, backward {b:.1f}, clip+AdamW+zero {o:.1f})"
            + (" (warm-up, excluded)" if i == 0 else ""))


def median(ms):
    return sorted(ms)[len(ms) // 2]  # bench.cc's ms[ms.size() / 2] after sorting


def forward_flops(model, batch, seq):
    """bench.cc's ForwardFlops: the matrix products of one forward pass."""
    hidden, layers, _, inter = PRESETS[model]
    t = batch * seq
    per_layer = t * (2 * 4 * hidden * hidden + 2 * 2 * hidden * inter) + batch * 2.0 * 2 * seq * seq * hidden
    return layers * per_layer + batch * (2 * hidden * hidden + 2 * hidden * 2)
