"""What the step timers share and that needs neither transformers nor a particular torch: model
shapes, bench.cc's batch, its timed step, FLOP count, median and per-step line."""
import time

import torch

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


def slowest_rank_ms(run_step, steps, rank):
    """The distributed timers' loop: run_step() (returning its forward, backward and optimizer
    seconds) steps + 1 times; each step's time is its slowest rank's (an all-reduce MAX of the
    total and of each part), printed by rank 0. Returns steps 1..steps in ms (step 0 warms up)."""
    import torch.distributed as dist  # only the distributed timers need it
    ms = []
    for i in range(steps + 1):
        parts = run_step()
        t = torch.tensor([sum(parts), *parts], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if rank == 0:
            # Each figure is its own maximum over ranks, so the parts need not add up.
            print(step_line(i, t[1:].tolist(), t[0].item(), "slowest rank; each part's max: "), flush=True)
        if i > 0:
            ms.append(t[0].item() * 1000)
    return ms


def median(ms):
    return sorted(ms)[len(ms) // 2]  # bench.cc's ms[ms.size() / 2] after sorting


def forward_flops(model, batch, seq):
    """bench.cc's ForwardFlops: the matrix products of one forward pass."""
    hidden, layers, _, inter = PRESETS[model]
    t = batch * seq
    per_layer = t * (2 * 4 * hidden * hidden + 2 * 2 * hidden * inter) + batch * 2.0 * 2 * seq * seq * hidden
    return layers * per_layer + batch * (2 * hidden * hidden + 2 * hidden * 2)


def random_batch(vocab, batch, seq):
    """bench.cc's batch: ids randint(1, vocab), token types 0 then 1 by halves, mask all ones,
    random labels (drawn in that order from the seeded default generator)."""
    ids = torch.randint(1, vocab, (batch, seq))
    seg = torch.cat([torch.zeros(batch, seq // 2, dtype=torch.long),
                     torch.ones(batch, seq - seq // 2, dtype=torch.long)], 1)
    return ids, seg, torch.ones(batch, seq, dtype=torch.long), torch.randint(0, 2, (batch,))


def timed_step(loss_fn, params, opt, sync=lambda: None):
    """One training step as bench.cc times it; returns (forward, backward, clip+AdamW+zero) s.
    sync waits for a GPU's queued work before each clock reading (bench.cc's Sync)."""
    sync()
    t0 = time.perf_counter()
    loss = loss_fn()
    sync()
    t1 = time.perf_counter()
    loss.backward()
    sync()
    t2 = time.perf_counter()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    sync()
    return t1 - t0, t2 - t1, time.perf_counter() - t2
