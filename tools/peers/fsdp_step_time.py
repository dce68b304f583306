"""Times HuggingFace BERT training steps under PyTorch's FSDP2 (fully_shard) on Gloo, one host.

    python fsdp_step_time.py --world_size=2 --model=tiny --batch_size=8 --threads=1 --steps=10

Spawns --world_size processes (torch.multiprocessing, spawn) that join a Gloo group over
tcp://127.0.0.1:<free port> and a one-dimensional CPU device mesh over it, and shard
hf_step_time.py's model (tiny, mid or base; attention --attn, dropout --dropout) the way task 6
cuts it into units: fully_shard on the embeddings, on each encoder layer, then on the root,
whose group keeps what is left (the pooler and the classifier: task 6's head). Every group
reshards after forward (reshard_after_forward=True, the root's too: task 6 gathers its head
again in backward), float32 throughout (no mixed precision). Each step is hf_step_time.py's:
forward (all-gathers), backward (all-gathers again, reduce-scatters), clip_grad_norm_(1.0)
(over the DTensor shards: one all-reduce of the norm), AdamW on the shards (--optim, built
after fully_shard, which replaces the parameters), zero_grad. --batch_size and --threads are
per rank. After each step, outside the timed region, the ranks all_reduce their step times with
MAX: a synchronous step is as slow as its slowest rank. Rank 0 prints a line per step and last
one JSON line {"impl": "pytorch_fsdp2", "ms_per_step": median of those maxima}. Every rank
trains on the same random batch (the values do not change the time).

--prefetch=implicit: FSDP2's defaults (in backward it gathers the unit the reverse forward
order names next; no forward prefetch). --prefetch=explicit: as task 6's UnitToPrefetch, each
unit names the next one its pass runs (set_modules_to_forward_prefetch in the order root,
embeddings, layers; set_modules_to_backward_prefetch in the order root, last layer, ...,
embeddings). On a CPU device FSDP2 issues its all-gathers and reduce-scatters synchronously
(unshard_async_op defaults to False, and foreach_reduce never passes async_op): a "prefetch"
then gathers the next unit earlier, but waits for it before the current unit computes.
--async_gather makes the gathers asynchronous (the private FSDPModule._set_unshard_async_op,
waited just before the unit computes), which with --prefetch=explicit overlaps each gather
with the unit before it, as task 6's --fsdp=prefetch does; the reduce-scatters stay synchronous
either way (nothing like task 6's --fsdp=overlap).
"""
import argparse
import datetime
import gc
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import transformers
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_step_time import VOCAB, add_flags, build, check_flags, make_optimizer, median, train_step  # noqa: E402
from step_common import slowest_rank_ms  # noqa: E402

transformers.utils.logging.disable_progress_bar()  # one summary line per program, no bars


def free_port():
    # The kernel picks an unused port; another process could take it before rank 0 binds it,
    # which init_process_group would then report as an error rather than hang on.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shard(model, mesh, a):
    """fully_shard in task 6's units; returns the FSDP modules in forward order (root first)."""
    units = [model.bert.embeddings, *model.bert.encoder.layer]
    for u in units:
        fully_shard(u, mesh=mesh, reshard_after_forward=True)
    # Explicitly True: left at None, FSDP2 keeps the root's parameters whole from forward to backward.
    fully_shard(model, mesh=mesh, reshard_after_forward=True)
    if a.prefetch == "explicit":
        # The root's pre-forward runs first, then the embeddings, the layers; the root's pre-backward
        # first (the gradient reaches the logits), then the layers from the last, the embeddings.
        fwd = [model, *units]
        bwd = [model, *reversed(units)]
        for order, set_next in ((fwd, "set_modules_to_forward_prefetch"), (bwd, "set_modules_to_backward_prefetch")):
            for cur, nxt in zip(order, order[1:]):
                getattr(cur, set_next)([nxt])
    if a.async_gather:
        # Private in torch 2.11 (no public switch): a torch without it must say so, not time something else.
        if not hasattr(model, "_set_unshard_async_op"):
            raise SystemExit(f"--async_gather: torch {torch.__version__}'s FSDP2 has no FSDPModule._set_unshard_async_op")
        model._set_unshard_async_op(True)  # every FSDP module under the root
    return [model, *units]


def held_model_state_bytes(params, opt):
    """What this rank holds between updates, as task 6's held_model_state_bytes counts it: its
    parameter shards, their gradients and AdamW's two moments. The gradients are counted as the
    parameters' shards (FSDP2's reduce-scatter leaves each one shaped like its parameter's shard;
    zero_grad(set_to_none=True) has freed them by the time this runs)."""
    def local_bytes(t):
        t = t.to_local() if hasattr(t, "to_local") else t
        return t.numel() * t.element_size()
    param = sum(local_bytes(p) for p in params)
    moments = sum(local_bytes(opt.state[p][k]) for p in params for k in ("exp_avg", "exp_avg_sq"))
    return 2 * param + moments


def worker(rank, a, port):
    # Gloo otherwise picks the interface the host name resolves to, which in containers is
    # often not one the other ranks can reach; every rank is on this host.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(a.threads)
    # The timeout bounds joining the group (a rank that never starts) and every collective after.
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=a.world_size, timeout=datetime.timedelta(seconds=a.timeout_s))
    model = opt = None
    try:
        mesh = init_device_mesh("cpu", (a.world_size,))
        # build's optimizer holds the parameters fully_shard is about to replace: dropped, and
        # one made again over the shards (the seed and the batch are build's, as for DDP).
        model, _, _, batch = build(a)
        shard(model, mesh, a)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = make_optimizer(params, a.optim)
        ms = slowest_rank_ms(lambda: train_step(model, params, opt, batch), a.steps, rank)
        if rank == 0:
            print(json.dumps({
                "impl": "pytorch_fsdp2", "backend": "gloo", "world_size": a.world_size,
                "attn": model.config._attn_implementation, "model": a.model,
                "batch_size": a.batch_size, "seq_len": a.seq_len, "threads": torch.get_num_threads(),
                "ms_per_step": median(ms), "prefetch": a.prefetch, "async_gather": a.async_gather,
                "units": 2 + len(model.bert.encoder.layer), "reshard_after_forward": True,
                "held_model_state_bytes": held_model_state_bytes(params, opt), "optim": a.optim,
                "dropout": a.dropout, "steps": a.steps,
                "torch": torch.__version__, "transformers": transformers.__version__}), flush=True)
    finally:
        # As ddp_step_time.py: what holds tensors of the group's collectives goes before the group.
        model = opt = None
        gc.collect()
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world_size", type=int, default=2)
    ap.add_argument("--timeout_s", type=int, default=60, help="Gloo timeout: joining and each collective")
    ap.add_argument("--prefetch", choices=["implicit", "explicit"], default="implicit",
                    help="implicit: FSDP2's defaults; explicit: each unit names the next one (task 6's order)")
    ap.add_argument("--async_gather", action="store_true",
                    help="all-gathers launched asynchronously (FSDP2's private _set_unshard_async_op)")
    add_flags(ap, sorted(VOCAB))
    a = ap.parse_args()
    check_flags(ap, a)
    if a.world_size < 1:
        ap.error("need --world_size >= 1")
    # The device mesh is a CPU one over Gloo; hf_step_time.py's GPU flags have no meaning here.
    if a.device != "cpu" or a.bf16:
        ap.error("--device=cuda and --bf16 are not supported: FSDP2 runs here on a CPU mesh over Gloo, in float32")
    cores = os.cpu_count() or 1
    if a.world_size * a.threads > cores:
        print(f"fsdp_step_time: {a.world_size} ranks x {a.threads} threads on {cores} cores: "
              "ranks will compete for cores", file=sys.stderr)
    # spawn, not fork: each rank starts a fresh interpreter, so no OpenMP or Gloo state is shared.
    mp.spawn(worker, args=(a, free_port()), nprocs=a.world_size, join=True)


if __name__ == "__main__":
    main()
