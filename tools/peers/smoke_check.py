"""What each tools/peers program promises, checked on its output (tools/peers/smoke_test.sh runs it).

    python smoke_check.py WHAT ARGS...

One subcommand per program; it prints nothing and exits 0 when the output holds what README.md
and the program's docstring say, else exits 1 with one line saying what is missing or wrong.
Standard library only (safetensors files are read by their JSON header), so any python3 runs it.
"""
import json
import math
import os
import struct
import sys


class Bad(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise Bad(msg)


def load_json(path):
    need(os.path.isfile(path), f"{path}: missing")
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except ValueError as e:
            raise Bad(f"{path}: not JSON ({e})")


def last_json_line(path):
    """The program's last stdout line, parsed (the JSON line the step timers and compare_* print)."""
    need(os.path.isfile(path), f"{path}: missing")
    with open(path, encoding="utf-8") as f:
        lines = [l for l in f.read().splitlines() if l.strip()]
    need(lines, f"{path}: no output on stdout")
    try:
        out = json.loads(lines[-1])
    except ValueError:
        raise Bad(f"last stdout line is not JSON: {lines[-1][:200]!r}")
    need(isinstance(out, dict), f"last stdout line is not a JSON object: {lines[-1][:200]!r}")
    return out


def keys(d, names, what):
    missing = [k for k in names if k not in d]
    need(not missing, f"{what}: no {', '.join(missing)} (has {', '.join(sorted(d))})")


def positive(d, names, what):
    for k in names:
        v = d[k]
        need(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0,
             f"{what}: {k} is {v!r}, not a positive number")


def safetensors_shapes(path):
    """name -> shape from a .safetensors file's header."""
    need(os.path.isfile(path), f"{path}: missing")
    with open(path, "rb") as f:
        head = f.read(8)
        need(len(head) == 8, f"{path}: shorter than a safetensors header")
        (n,) = struct.unpack("<Q", head)
        need(n < 100_000_000, f"{path}: header length {n}: not a safetensors file")
        header = json.loads(f.read(n))
    return {k: v["shape"] for k, v in header.items() if k != "__metadata__"}


def files(folder, names):
    for n in names:
        need(os.path.isfile(os.path.join(folder, n)), f"{folder}/{n}: missing")


def check_setup(cache, torch_version, transformers, tokenizers, safetensors):
    """setup.sh: the running interpreter is its environment: the pinned versions, torch from the wheel."""
    import safetensors as st
    import tokenizers as tk
    import torch
    import transformers as tf
    got = {"transformers": tf.__version__, "tokenizers": tk.__version__, "safetensors": st.__version__}
    want = {"transformers": transformers, "tokenizers": tokenizers, "safetensors": safetensors}
    need(got == want, f"versions {got}, README pins {want}")
    wheel = os.path.realpath(os.path.join(cache, f"torch-{torch_version}"))
    need(os.path.realpath(torch.__file__).startswith(wheel + os.sep),
         f"torch {torch.__version__} from {torch.__file__}, not tools/torch_wheel.sh's {wheel}")
    need(torch.__version__.split("+")[0] == torch_version, f"torch {torch.__version__}, not {torch_version}")


def check_checkpoint(folder, vocab_lines):
    """make_checkpoint.sh --preset=tiny: config.json + model.safetensors + vocab.txt + data/train.tsv."""
    files(folder, ["config.json", "model.safetensors", "vocab.txt", "data/train.tsv"])
    need(not os.path.exists(folder + ".partial"), f"{folder}.partial left behind")
    c = load_json(os.path.join(folder, "config.json"))
    want = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512,
            "vocab_size": int(vocab_lines), "max_position_embeddings": 512, "type_vocab_size": 2}
    got = {k: c.get(k) for k in want}
    need(got == want, f"config.json {got}, the tiny preset is {want}")
    shapes = safetensors_shapes(os.path.join(folder, "model.safetensors"))
    need(shapes.get("bert.embeddings.word_embeddings.weight") == [int(vocab_lines), 128],
         f"model.safetensors: word embeddings {shapes.get('bert.embeddings.word_embeddings.weight')}")
    need(shapes.get("classifier.weight") == [2, 128], f"model.safetensors: classifier {shapes.get('classifier.weight')}")


def check_dump(folder, steps, batch, seq):
    """hf_dump.sh: dump.safetensors (init., the batch, logits, loss, grad., SDPA, traces) and meta.json."""
    steps, batch, seq = int(steps), int(batch), int(seq)
    shapes = safetensors_shapes(os.path.join(folder, "dump.safetensors"))
    for name, shape in {"input_ids": [batch, seq], "token_type_ids": [batch, seq], "attention_mask": [batch, seq],
                        "labels": [batch], "logits": [batch, 2], "loss": [1], "logits_sdpa": [batch, 2],
                        "trace.loss": [steps], "trace.grad_norm": [steps], "trace.lr": [steps],
                        "trace.final_logits": [batch, 2], "trace_sdpa.loss": [steps],
                        "trace_sdpa.grad_norm": [steps], "trace_sdpa.final_logits": [batch, 2]}.items():
        need(shapes.get(name) == shape, f"dump.safetensors: {name} is {shapes.get(name)}, expected {shape}")
    init = {k[5:] for k in shapes if k.startswith("init.")}
    grad = {k[5:] for k in shapes if k.startswith("grad.")}
    need("classifier.weight" in init and "bert.embeddings.word_embeddings.weight" in init,
         f"dump.safetensors: init.* lacks the classifier or the embeddings ({len(init)} tensors)")
    need(grad and grad <= init, f"dump.safetensors: grad.* ({len(grad)}) not a subset of init.* ({len(init)})")
    meta = load_json(os.path.join(folder, "meta.json"))
    keys(meta, ["torch", "transformers", "settings", "rows", "sdpa_vs_eager_max_abs_logit_diff",
                "sdpa_vs_eager_trace_max_rel_diff", "loss", "trace_loss"], "meta.json")
    need(len(meta["trace_loss"]) == steps and all(math.isfinite(x) for x in meta["trace_loss"]),
         f"meta.json: trace_loss {meta['trace_loss']}, expected {steps} finite losses")
    need(math.isfinite(meta["loss"]), f"meta.json: loss {meta['loss']}")


def check_tokenize(folder, pairs):
    """hf_tokenize.sh: rte_{uncased,cased}_max{128,48}.jsonl, a line per pair, and disagreements.json."""
    pairs = int(pairs)
    for case in ("uncased", "cased"):
        for m in (128, 48):
            path = os.path.join(folder, f"rte_{case}_max{m}.jsonl")
            need(os.path.isfile(path), f"{path}: missing")
            with open(path, encoding="utf-8") as f:
                rows = [json.loads(l) for l in f]
            need(len(rows) == pairs, f"{path}: {len(rows)} lines, {pairs} pairs")
            for r in rows:
                keys(r, ["split", "index", "input_ids", "segment_ids"], path)
                need(2 < len(r["input_ids"]) <= m and len(r["segment_ids"]) == len(r["input_ids"]),
                     f"{path}: {r['split']} {r['index']}: {len(r['input_ids'])} ids, {len(r['segment_ids'])} segment ids")
    d = load_json(os.path.join(folder, "disagreements.json"))
    keys(d, ["slow_tokenizer", "fast_tokenizer", "transformers", "pairs", "timing_s", "disagreements"], "disagreements.json")
    need(d["pairs"] == pairs, f"disagreements.json: pairs {d['pairs']}, expected {pairs}")


def check_vit(folder):
    """hf_vit_dump.py: model/ (config.json, model.safetensors), dump.safetensors, meta.json."""
    files(folder, ["model/config.json", "model/model.safetensors", "meta.json"])
    need(not os.path.exists(folder + ".partial"), f"{folder}.partial left behind")
    shapes = safetensors_shapes(os.path.join(folder, "dump.safetensors"))
    for name, shape in {"batches.pixel_values": [12, 4, 3, 32, 32], "batches.labels": [12, 4],
                        "logits": [4, 10], "loss": [1], "trace.loss": [12]}.items():
        need(shapes.get(name) == shape, f"dump.safetensors: {name} is {shapes.get(name)}, expected {shape}")
    model = safetensors_shapes(os.path.join(folder, "model", "model.safetensors"))
    grads = {k[5:] for k in shapes if k.startswith("grad.")}
    need(grads == set(model), f"dump.safetensors: grad.* names {len(grads)} do not match the checkpoint's {len(model)}")
    keys(load_json(os.path.join(folder, "meta.json")), ["transformers", "torch", "steps", "lr"], "meta.json")


def check_finetune_init(folder):
    """hf_finetune.py --init_out: config.json + model.safetensors + vocab.txt."""
    files(folder, ["config.json", "model.safetensors", "vocab.txt"])
    need(safetensors_shapes(os.path.join(folder, "model.safetensors")).get("classifier.weight") == [2, 128],
         "model.safetensors: no 2-label classifier")


def check_finetune(folder, updates):
    """hf_finetune.py --out: args.json, train_log.jsonl (a line per update), eval_results.json."""
    updates = int(updates)
    args = load_json(os.path.join(folder, "args.json"))
    need(args.get("updates") == updates, f"args.json: updates {args.get('updates')}, expected {updates}")
    path = os.path.join(folder, "train_log.jsonl")
    need(os.path.isfile(path), f"{path}: missing")
    with open(path, encoding="utf-8") as f:
        log = [json.loads(l) for l in f]
    need(len(log) == updates, f"train_log.jsonl: {len(log)} lines, expected {updates}")
    for i, u in enumerate(log):
        keys(u, ["step", "epoch", "loss", "lr", "grad_norm"], "train_log.jsonl")
        need(u["step"] == i + 1 and math.isfinite(u["loss"]), f"train_log.jsonl line {i + 1}: {u}")
    ev = load_json(os.path.join(folder, "eval_results.json"))
    keys(ev, ["transformers", "torch", "evals"], "eval_results.json")
    need(len(ev["evals"]) == 1, f"eval_results.json: {len(ev['evals'])} evaluations, expected 1 (one epoch begun)")
    keys(ev["evals"][0], ["epoch", "accuracy", "loss", "examples"], "eval_results.json evals[0]")
    need(0 <= ev["evals"][0]["accuracy"] <= 1, f"eval_results.json: accuracy {ev['evals'][0]['accuracy']}")


def check_compare_step(stdout, line, batch, seq):
    """compare_step.sh: one JSON line with cpp_ms, hf_eager_ms, hf_sdpa_ms, sgemm_gflops and the ratios."""
    out = last_json_line(stdout)
    keys(out, ["model", "batch_size", "seq_len", "threads", "torch", "same_torch", "peer", "cpp_ms", "hf_eager_ms",
               "hf_sdpa_ms", "sgemm_gflops", "cpp_over_sdpa", "cpp_over_eager", "cpp_fraction_of_sgemm"], "JSON")
    need((out["model"], out["batch_size"], out["seq_len"]) == ("tiny", int(batch), int(seq)),
         f"JSON: model {out['model']} batch {out['batch_size']} seq_len {out['seq_len']}, asked tiny {batch} x {seq}")
    positive(out, ["cpp_ms", "hf_eager_ms", "sgemm_gflops", "cpp_over_eager", "cpp_fraction_of_sgemm"], "JSON")
    if line == "1.13":
        need(out["hf_sdpa_ms"] is None and out["cpp_over_sdpa"] is None, "JSON: --line=1.13 has no SDPA, yet hf_sdpa_ms is set")
        need(out["peer"] == "pytorch_transformers 1.2.0", f"JSON: peer {out['peer']!r}")
        need(str(out["torch"]).startswith("1.13"), f"JSON: torch {out['torch']}")
    else:
        positive(out, ["hf_sdpa_ms", "cpp_over_sdpa"], "JSON")
        need(out["peer"].startswith("transformers "), f"JSON: peer {out['peer']!r}")
        need(str(out["torch"]).startswith(line), f"JSON: torch {out['torch']}, --line={line}")


def check_step_time(stdout, bf16):
    """hf_step_time.py alone: its JSON names the precision, and each part has its median."""
    out = last_json_line(stdout)
    keys(out, ["impl", "ms_per_step", "forward_ms", "backward_ms", "clip_adamw_zero_ms", "device", "bf16"], "JSON")
    positive(out, ["ms_per_step", "forward_ms", "backward_ms", "clip_adamw_zero_ms"], "JSON")
    need(out["bf16"] == (bf16 == "bf16"), f"JSON: bf16 {out['bf16']}, asked {bf16}")
    need(out["device"] == "cpu", f"JSON: device {out['device']}, asked cpu")


def check_compare_ddp(stdout, world, batch, seq):
    """compare_ddp.sh: one JSON line with both medians, the ratio and task 3's compute / exposed comm."""
    out = last_json_line(stdout)
    keys(out, ["model", "world_size", "batch_size", "seq_len", "threads", "torch", "same_torch", "repeats",
               "task3_ms", "pytorch_ddp_ms", "task3_over_ddp", "task3_runs_ms", "ddp_runs_ms",
               "task3_run1_parts_ms"], "JSON")
    need((out["world_size"], out["batch_size"], out["seq_len"]) == (int(world), int(batch), int(seq)),
         f"JSON: world {out['world_size']} batch {out['batch_size']} seq_len {out['seq_len']}")
    positive(out, ["task3_ms", "pytorch_ddp_ms", "task3_over_ddp"], "JSON")
    need(len(out["task3_runs_ms"]) == len(out["ddp_runs_ms"]) == out["repeats"], "JSON: a figure per run missing")
    parts = out["task3_run1_parts_ms"]
    keys(parts, ["compute_ms", "comm_exposed_ms", "comm_busy_ms", "buckets"], "task3_run1_parts_ms")
    positive(parts, ["compute_ms", "buckets"], "task3_run1_parts_ms")


def check_compare_fsdp(stdout, world, batch, seq):
    """compare_fsdp.sh --blocking: both medians, the ratios, task 6's communication and both sides' model state."""
    out = last_json_line(stdout)
    keys(out, ["model", "world_size", "batch_size", "seq_len", "threads", "torch", "same_torch", "repeats",
               "fsdp2_prefetch", "fsdp2_async_gather", "task6_ms", "pytorch_fsdp2_ms", "task6_over_fsdp2",
               "task6_runs_ms", "fsdp2_runs_ms", "task6_blocking_ms", "task6_blocking_over_fsdp2",
               "task6_blocking_runs_ms", "task6_run1_parts", "fsdp2_held_model_state_bytes"], "JSON")
    need((out["world_size"], out["batch_size"], out["seq_len"]) == (int(world), int(batch), int(seq)),
         f"JSON: world {out['world_size']} batch {out['batch_size']} seq_len {out['seq_len']}")
    positive(out, ["task6_ms", "pytorch_fsdp2_ms", "task6_over_fsdp2", "task6_blocking_ms",
                   "fsdp2_held_model_state_bytes"], "JSON")
    need(len(out["task6_runs_ms"]) == len(out["fsdp2_runs_ms"]) == len(out["task6_blocking_runs_ms"]) == out["repeats"],
         "JSON: a figure per run missing")
    parts = out["task6_run1_parts"]
    keys(parts, ["compute_ms", "comm_exposed_ms", "comm_hidden_ms", "comm_busy_ms", "comm_bytes",
                 "held_model_state_bytes", "mem_peak_bytes"], "task6_run1_parts")
    positive(parts, ["compute_ms", "comm_bytes", "held_model_state_bytes", "mem_peak_bytes"], "task6_run1_parts")
    # Both keep 1/N of parameters, gradients and AdamW's moments; only their padding differs
    # (task 6 pads each unit, FSDP2 each parameter's first dimension).
    t6, f2 = parts["held_model_state_bytes"], out["fsdp2_held_model_state_bytes"]
    need(abs(t6 - f2) <= 0.01 * t6, f"held model state: task 6 {t6} bytes, FSDP2 {f2}: more than 1 % apart")


def check_model_parallel(stdout, impl, layout, world, batch, seq):
    """model_parallel_step_time.py: its JSON line, for the layout asked, with a positive step time."""
    out = last_json_line(stdout)
    keys(out, ["impl", "layout", "world_size", "batch_size", "seq_len", "ms_per_step", "torch"], "JSON")
    need((out["impl"], out["layout"]) == (impl, layout), f"JSON: impl {out['impl']} layout {out['layout']}")
    need((out["world_size"], out["batch_size"], out["seq_len"]) == (int(world), int(batch), int(seq)),
         f"JSON: world {out['world_size']} batch {out['batch_size']} seq_len {out['seq_len']}")
    positive(out, ["ms_per_step"], "JSON")


CHECKS = {"setup": check_setup, "checkpoint": check_checkpoint, "dump": check_dump, "tokenize": check_tokenize,
          "vit": check_vit, "finetune_init": check_finetune_init, "finetune": check_finetune,
          "compare_step": check_compare_step, "step_time": check_step_time, "compare_ddp": check_compare_ddp,
          "compare_fsdp": check_compare_fsdp, "model_parallel": check_model_parallel}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in CHECKS:
        sys.exit(f"usage: smoke_check.py {{{'|'.join(CHECKS)}}} ARGS...")
    try:
        CHECKS[sys.argv[1]](*sys.argv[2:])
    except Bad as e:
        print(e)
        sys.exit(1)
    except (ValueError, KeyError, TypeError) as e:  # malformed output the checks did not foresee
        print(f"{type(e).__name__}: {e}")
        sys.exit(1)


if __name__ == "__main__":
    main()
