"""What PyTorch's Gloo puts on the wire per collective, counted by the kernel (loopback's tx bytes).

    python=$(tools/peers/setup.sh | tail -1); "$python" task4_bench/gloo_bytes.py --world_size=4

Spawns --world_size ranks on 127.0.0.1 and runs all_reduce, reduce_scatter_tensor, reduce_scatter
(a list) and all_gather_into_tensor on --mib MiB per rank, each between barriers, and prints the
bytes all ranks sent as a multiple of the payload. A ring all-reduce sends 2(N-1) x the payload
over all ranks, a ring reduce-scatter or all-gather (N-1) x. Why tasks 5 and 6 all-reduce and
slice over Gloo on LibTorch 2.x too (common/zero/sharded_adamw.cc: HasReduceScatter). Other
traffic on loopback while it runs is counted too: run it on an idle machine.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def loopback_tx_bytes():
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[8])
    raise SystemExit("gloo_bytes.py: no loopback interface in /proc/net/dev")


def rank_main(rank, world, mib, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    numel = world * (mib << 18)  # mib MiB of float32 per rank's share, world shares
    full = torch.ones(numel)
    block = torch.empty(numel // world)
    cases = [
        ("all_reduce", lambda: dist.all_reduce(full)),
        ("reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(block, full)),
        ("reduce_scatter (list)", lambda: dist.reduce_scatter(block, list(full.chunk(world)))),
        ("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(full, block)),
    ]
    for name, run in cases:
        dist.barrier()
        before = loopback_tx_bytes()
        dist.barrier()
        run()
        dist.barrier()
        sent = loopback_tx_bytes() - before
        if rank == 0:
            payload = full.numel() * 4
            print(f"{name}: {sent / 1e6:.1f} MB sent by all ranks, {sent / payload:.2f} x the {payload / 1e6:.1f} MB tensor",
                  flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world_size", type=int, default=4)
    p.add_argument("--mib", type=int, default=4, help="MiB per rank's block")
    p.add_argument("--port", type=int, default=29611)
    a = p.parse_args()
    if a.world_size < 2 or a.mib < 1:
        raise SystemExit("gloo_bytes.py: need --world_size >= 2 and --mib >= 1")
    print(f"torch {torch.__version__}, Gloo, {a.world_size} ranks on 127.0.0.1", flush=True)
    mp.spawn(rank_main, args=(a.world_size, a.mib, a.port), nprocs=a.world_size)


if __name__ == "__main__":
    main()
