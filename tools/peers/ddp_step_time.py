"""Times HuggingFace BERT training steps under PyTorch DistributedDataParallel on Gloo, one host.

    python ddp_step_time.py --world_size=2 --model=tiny --batch_size=8 --threads=1 --steps=10

Spawns --world_size processes (torch.multiprocessing, spawn) that join a Gloo group over
tcp://127.0.0.1:<free port>, wrap hf_step_time.py's model (tiny, mid or base; attention
--attn, dropout --dropout) in DistributedDataParallel with its defaults (bucket_cap_mb 25,
gradients averaged in buckets during backward) and time hf_step_time.py's step: forward,
backward (with DDP's all_reduce), clip_grad_norm_(1.0), AdamW, zero_grad. --batch_size and
--threads are per rank. After each step, outside the timed region, the ranks all_reduce their
step times with MAX: a synchronous step is as slow as its slowest rank. Rank 0 prints a line
per step and last one JSON line {"impl": "pytorch_ddp", "ms_per_step": median of those maxima}.
Every rank trains on the same random batch (the values do not change the time).
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
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_step_time import VOCAB, add_flags, build, check_flags, median, train_step  # noqa: E402
from step_common import slowest_rank_ms  # noqa: E402

transformers.utils.logging.disable_progress_bar()  # one summary line per program, no bars

BUCKET_CAP_MB = 25  # DistributedDataParallel's default, named so the JSON can say it


def free_port():
    # The kernel picks an unused port; another process could take it before rank 0 binds it,
    # which init_process_group would then report as an error rather than hang on.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, a, port):
    # Gloo otherwise picks the interface the host name resolves to, which in containers is
    # often not one the other ranks can reach; every rank is on this host.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(a.threads)
    # The timeout bounds joining the group (a rank that never starts) and every collective after.
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=a.world_size, timeout=datetime.timedelta(seconds=a.timeout_s))
    ddp = None
    try:
        model, params, opt, batch = build(a)
        ddp = DistributedDataParallel(model, bucket_cap_mb=BUCKET_CAP_MB)
        ms = slowest_rank_ms(lambda: train_step(ddp, params, opt, batch), a.steps, rank)
        if rank == 0:
            print(json.dumps({
                "impl": "pytorch_ddp", "backend": "gloo", "world_size": a.world_size,
                "attn": model.config._attn_implementation, "model": a.model,
                "batch_size": a.batch_size, "seq_len": a.seq_len, "threads": torch.get_num_threads(),
                "ms_per_step": median(ms), "bucket_cap_mb": BUCKET_CAP_MB, "optim": a.optim,
                "dropout": a.dropout, "steps": a.steps,
                "torch": torch.__version__, "transformers": transformers.__version__}), flush=True)
    finally:
        # DDP first, while the group registry still holds the process group; then the group,
        # whose last reference the registry drops through the group's Python binding, which
        # releases the GIL while ~ProcessGroupGloo joins Gloo's worker threads. The other way
        # round, DDP's C++ Reducer drops the last reference when the frame is cleared, holding
        # the GIL, while a worker thread may still be releasing the last all_reduce's tensor
        # and wait for the GIL: a deadlock (torch 2.11 under load: a rank hung at exit for
        # minutes after rank 0 had printed its JSON; gdb showed exactly those two threads).
        ddp = None
        gc.collect()
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world_size", type=int, default=2)
    ap.add_argument("--timeout_s", type=int, default=60, help="Gloo timeout: joining and each collective")
    add_flags(ap, sorted(VOCAB))
    a = ap.parse_args()
    check_flags(ap, a)
    if a.world_size < 1:
        ap.error("need --world_size >= 1")
    cores = os.cpu_count() or 1
    if a.world_size * a.threads > cores:
        print(f"ddp_step_time: {a.world_size} ranks x {a.threads} threads on {cores} cores: "
              "ranks will compete for cores", file=sys.stderr)
    # spawn, not fork: each rank starts a fresh interpreter, so no OpenMP or Gloo state is shared.
    mp.spawn(worker, args=(a, free_port()), nprocs=a.world_size, join=True)


if __name__ == "__main__":
    main()
