"""Times HuggingFace BERT training steps under PyTorch's own tensor or pipeline parallelism, on Gloo, one host.

    python model_parallel_step_time.py --layout=tensor --world_size=4 --model=base --batch_size=8 --threads=1
    python model_parallel_step_time.py --layout=1f1b --world_size=4 --micro_batches=8 --model=base --batch_size=8
    python model_parallel_step_time.py --layout=tensor --world_size=4 --tensor_parallel_size=2 --model=base --batch_size=8
    python model_parallel_step_time.py --layout=1f1b --world_size=4 --pipeline_parallel_size=2 --micro_batches=2 --model=base

Task 7's peers (docs/design/task7_costs.md's cost table). Spawns --world_size processes that join
a Gloo group over tcp://127.0.0.1 (as fsdp_step_time.py), each building hf_step_time.py's model
with the same seed, and times hf_step_time.py's step (forward, backward, clip_grad_norm_(1.0),
AdamW, zero_grad) on the same batch, each step's time its slowest rank's.

--layout=tensor: torch.distributed.tensor.parallel on a one-dimensional CPU mesh, Megatron-LM's
  layout as task 7a cuts it: in every encoder layer query, key, value and the intermediate
  linear ColwiseParallel, the attention's output projection and the output linear
  RowwiseParallel; embeddings, LayerNorms, pooler and classifier replicated. Every rank reads
  the whole batch (--batch_size). The gradient norm is the whole model's (the DTensor shards'
  squared norms summed over the mesh, the replicated ones once), as task 7a computes it.
  With --tensor_parallel_size=T below --world_size (task 7c), a two-dimensional mesh of
  world / T replicas ("dp") by T ("tp"), tensor-first as task7/device_mesh.h numbers it: the
  split over "tp", each replica reading its share of --batch_size, and after backward every
  gradient (a DTensor's local block) averaged over "dp" by one flattened all-reduce, as task 7c's
  AverageOverDataGroup does; the norm's squares summed over "tp" only.
--layout=gpipe|1f1b: torch.distributed.pipelining, the model cut as task 7b cuts it (stage s
  holds layers [s L / P, (s + 1) L / P), the embeddings on stage 0, pooler, classifier and
  loss on the last), ScheduleGPipe or Schedule1F1B over --micro_batches; --batch_size is the
  whole batch. The attention mask is all ones (random_batch's), so the stages pass hidden states
  only. The gradient norm is the whole model's (an all-reduce of the stages' squared norms).
  With --pipeline_parallel_size=P below --world_size (task 7c), a (dp, pp) mesh of world / P
  pipelines of P adjacent ranks, each reading its share of --batch_size, its stages'
  gradients averaged over "dp" after the schedule by one flattened all-reduce, the norm's
  squares summed over "pp".

--profile_out=FILE: after the timed steps, rank 0 runs one more under torch.profiler (CPU) and
writes its operators' table (self CPU time, top 30) and the step's phases to FILE: where the
step's time goes, for the cost table's account of PyTorch's side.

Rank 0 prints one JSON line: {"impl": "pytorch_tensor_parallel" | "pytorch_pipelining",
"ms_per_step": median of the steps' maxima, ...}. Float32, dropout --dropout (0.1).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_step_time import VOCAB, add_flags, build, check_flags, make_optimizer, median  # noqa: E402
from step_common import slowest_rank_ms  # noqa: E402

transformers.utils.logging.disable_progress_bar()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def whole_norm_clip(params, max_norm, summed, group=None):
    """clip_grad_norm_ with the whole model's norm: the squares of the parameters `summed(p)` names
    (this rank's blocks of tensors the group shares out) are added over the group by one
    all-reduce; the others' (the same on every rank) count once. Each square is computed once."""
    shared, own = [], []
    for p in params:
        if p.grad is not None:
            g = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
            (shared if summed(p) else own).append(g)
    squares = lambda gs: torch.stack([torch.sum(g * g) for g in gs]).sum() if gs else torch.zeros(())  # noqa: E731
    t = squares(shared).reshape(1).clone()
    dist.all_reduce(t, group=group)
    norm = (t[0] + squares(own)).sqrt()
    coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    for g in shared + own:
        g.mul_(coef)
    return norm


def average_gradients(params, group):
    """Each gradient (a DTensor's local block) becomes its mean over `group`: one flattened
    all-reduce, as task 7c's AverageOverDataGroup does."""
    grads = [p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad for p in params if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, group=group)
    flat.div_(dist.get_world_size(group))
    at = 0
    for g in grads:
        g.copy_(flat[at:at + g.numel()].view_as(g))
        at += g.numel()


def tensor_parallel(model, mesh):
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    plan = {"attention.self.query": ColwiseParallel(), "attention.self.key": ColwiseParallel(),
            "attention.self.value": ColwiseParallel(), "attention.output.dense": RowwiseParallel(),
            "intermediate.dense": ColwiseParallel(), "output.dense": RowwiseParallel()}
    for layer in model.bert.encoder.layer:
        parallelize_module(layer, mesh, plan)
    # What is timed must be split: this rank holds 1/T of every query weight's rows.
    q = model.bert.encoder.layer[0].attention.self.query.weight
    if not isinstance(q, DTensor) or q.to_local().shape[0] * mesh.size() != q.shape[0]:
        raise SystemExit(f"the query weight was not split over the {mesh.size()} ranks: {type(q).__name__} {tuple(q.shape)}")
    params = [p for p in model.parameters() if p.requires_grad]
    # A sharded DTensor's squares add over the ranks; a replicated tensor's would be counted T times.
    return params, lambda p: isinstance(p, DTensor) and not p.placements[0].is_replicate()


class Stage(torch.nn.Module):
    """Stage s of P: its layers, the embeddings first on stage 0, the head last on stage P - 1."""

    def __init__(self, model, s, p):
        super().__init__()
        layers = len(model.bert.encoder.layer)
        self.embeddings = model.bert.embeddings if s == 0 else None
        self.layers = torch.nn.ModuleList(model.bert.encoder.layer[s * layers // p:(s + 1) * layers // p])
        self.head = s == p - 1
        if self.head:
            self.pooler, self.dropout, self.classifier = model.bert.pooler, model.dropout, model.classifier

    def forward(self, x):
        h = self.embeddings(input_ids=x) if self.embeddings is not None else x
        for layer in self.layers:
            out = layer(h)
            h = out[0] if isinstance(out, tuple) else out
        if self.head:
            return self.classifier(self.dropout(self.pooler(h)))
        return h


def profile_step(step, rank, path):
    """One more step, rank 0's under torch.profiler; its operators by self CPU time into `path`."""
    from torch.profiler import ProfilerActivity, profile
    if rank != 0:
        step()
        return
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        parts = step()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30)
    with open(path + ".tmp", "w") as f:
        f.write("rank 0, one step: forward %.1f ms, backward %.1f ms, clip + AdamW + zero %.1f ms (under the "
                "profiler)\n\n" % tuple(x * 1000 for x in parts))
        f.write(table)
    os.replace(path + ".tmp", path)


def worker(rank, a, port):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=a.world_size, timeout=datetime.timedelta(seconds=a.timeout_s))
    model = opt = opts = schedule = None
    try:
        if a.vocab > 0:
            VOCAB[a.model] = a.vocab  # build() reads the preset's vocabulary from this table (spawned: set here)
        model, _, _, batch = build(a)
        if a.layout == "tensor":
            from torch.distributed.device_mesh import init_device_mesh
            t_size = a.tensor_parallel_size or a.world_size
            replicas = a.world_size // t_size
            mesh = init_device_mesh("cpu", (replicas, t_size), mesh_dim_names=("dp", "tp"))
            params, summed = tensor_parallel(model, mesh["tp"])
            tp_group = mesh["tp"].get_group()
            dp_group = mesh["dp"].get_group() if replicas > 1 else None
            if dp_group is not None:
                share = a.batch_size // replicas
                d = mesh.get_local_rank("dp")
                batch = {k: v[d * share:(d + 1) * share] for k, v in batch.items()}
            # One optimizer over the DTensors and one over the replicated tensors: fused AdamW
            # refuses a group that mixes the two.
            from torch.distributed.tensor import DTensor
            groups = [[p for p in params if isinstance(p, DTensor)], [p for p in params if not isinstance(p, DTensor)]]
            opts = [make_optimizer(g, a.optim) for g in groups if g]

            def step():
                import time
                t0 = time.perf_counter()
                loss = model(**batch).loss
                t1 = time.perf_counter()
                loss.backward()
                if dp_group is not None:
                    average_gradients(params, dp_group)
                t2 = time.perf_counter()
                whole_norm_clip(params, 1.0, summed, tp_group)
                for o in opts:
                    o.step()
                    o.zero_grad(set_to_none=True)
                return t1 - t0, t2 - t1, time.perf_counter() - t2
            impl = "pytorch_tensor_parallel"
        else:
            from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
            p_size = a.pipeline_parallel_size or a.world_size
            replicas = a.world_size // p_size
            s, pp_group, dp_group = rank, None, None
            if replicas > 1:
                from torch.distributed.device_mesh import init_device_mesh
                mesh = init_device_mesh("cpu", (replicas, p_size), mesh_dim_names=("dp", "pp"))
                s, pp_group, dp_group = mesh.get_local_rank("pp"), mesh["pp"].get_group(), mesh["dp"].get_group()
                share = a.batch_size // replicas
                d = mesh.get_local_rank("dp")
                batch = {k: v[d * share:(d + 1) * share] for k, v in batch.items()}
            stage_module = Stage(model, s, p_size)
            params = [p for p in stage_module.parameters() if p.requires_grad]
            opt = make_optimizer(params, a.optim)
            stage = PipelineStage(stage_module, s, p_size, torch.device("cpu"), group=pp_group)
            loss_fn = lambda logits, target: torch.nn.functional.cross_entropy(logits, target)  # noqa: E731
            kind = ScheduleGPipe if a.layout == "gpipe" else Schedule1F1B
            schedule = kind(stage, n_microbatches=a.micro_batches, loss_fn=loss_fn)

            def step():
                import time
                t0 = time.perf_counter()
                if s == 0:
                    schedule.step(batch["input_ids"])
                elif s == p_size - 1:
                    schedule.step(target=batch["labels"])
                else:
                    schedule.step()
                if dp_group is not None:
                    average_gradients(params, dp_group)
                t1 = time.perf_counter()
                whole_norm_clip(params, 1.0, lambda p: True, pp_group)  # every stage's squares add up
                opt.step()
                opt.zero_grad(set_to_none=True)
                return 0.0, t1 - t0, time.perf_counter() - t1  # forward and backward interleave: one figure
            impl = "pytorch_pipelining"
        ms = slowest_rank_ms(step, a.steps, rank)
        if a.profile_out:
            profile_step(step, rank, a.profile_out)
        if rank == 0:
            print(json.dumps({
                "impl": impl, "layout": a.layout, "backend": "gloo", "world_size": a.world_size,
                "tensor_parallel_size": (a.tensor_parallel_size or a.world_size) if a.layout == "tensor" else None,
                "pipeline_parallel_size": (a.pipeline_parallel_size or a.world_size) if a.layout != "tensor" else None,
                "micro_batches": a.micro_batches if a.layout != "tensor" else None, "model": a.model,
                "batch_size": a.batch_size, "seq_len": a.seq_len, "threads": torch.get_num_threads(),
                "ms_per_step": median(ms), "optim": a.optim, "dropout": a.dropout, "steps": a.steps,
                "torch": torch.__version__, "transformers": transformers.__version__}), flush=True)
    finally:
        model = opt = opts = schedule = None
        gc.collect()
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layout", choices=["tensor", "gpipe", "1f1b"], required=True)
    ap.add_argument("--world_size", type=int, default=2)
    ap.add_argument("--micro_batches", type=int, default=4)
    ap.add_argument("--tensor_parallel_size", type=int, default=0,
                    help="--layout=tensor: ranks per replica (0: all; below --world_size: data x tensor)")
    ap.add_argument("--pipeline_parallel_size", type=int, default=0,
                    help="--layout=gpipe|1f1b: stages per pipeline (0: all; below --world_size: data x pipeline)")
    ap.add_argument("--timeout_s", type=int, default=120, help="Gloo timeout: joining and each collective")
    ap.add_argument("--vocab", type=int, default=0, help="vocabulary size (0: the --model preset's)")
    ap.add_argument("--profile_out", default="", help="rank 0 profiles one more step into this file")
    add_flags(ap, sorted(VOCAB))
    a = ap.parse_args()
    check_flags(ap, a)
    if a.world_size < 2:
        ap.error("need --world_size >= 2")
    t_size = a.tensor_parallel_size or a.world_size
    if a.tensor_parallel_size < 0 or a.world_size % t_size != 0 or (a.layout != "tensor" and a.tensor_parallel_size):
        ap.error(f"--tensor_parallel_size={a.tensor_parallel_size} must divide --world_size={a.world_size} "
                 "(and goes with --layout=tensor only)")
    p_size = a.pipeline_parallel_size or a.world_size
    if a.pipeline_parallel_size < 0 or a.world_size % p_size != 0 or (a.layout == "tensor" and a.pipeline_parallel_size):
        ap.error(f"--pipeline_parallel_size={a.pipeline_parallel_size} must divide --world_size={a.world_size} "
                 "(and goes with --layout=gpipe or 1f1b only)")
    replicas = a.world_size // (t_size if a.layout == "tensor" else p_size)
    if a.batch_size % replicas != 0:
        ap.error(f"--batch_size={a.batch_size} must divide among the {replicas} replicas")
    if a.layout != "tensor" and (a.micro_batches < 1 or (a.batch_size // replicas) % a.micro_batches != 0):
        ap.error(f"--micro_batches={a.micro_batches} must divide a replica's batch of {a.batch_size // replicas}")
    if a.device != "cpu" or a.bf16:
        ap.error("--device=cuda and --bf16 are not supported: a CPU mesh over Gloo, float32")
    mp.spawn(worker, args=(a, free_port()), nprocs=a.world_size, join=True)


if __name__ == "__main__":
    main()
