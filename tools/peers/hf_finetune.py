"""transformers' BertForSequenceClassification fine-tuned on GLUE RTE the way distlm's part 1
runs it, for accuracy and loss parity: the same data order, batches, optimizer and
schedule, so that only the implementation differs.

  python hf_finetune.py --init_out=DIR --model=MODEL_DIR [--seed=42]
      writes MODEL_DIR's encoder with a classification head (2 labels) drawn by transformers
      under torch.manual_seed(seed), as config.json + model.safetensors + vocab.txt: the one
      starting point both sides then load (distlm reads the head instead of drawing its own).
  python hf_finetune.py --model=DIR --data_dir=RTE --out=OUT [--epochs=3] [--lr=2e-5]
      [--batch=8] [--max_seq_length=128] [--seed=42] [--dropout=keep|0] [--max_steps=N]
      [--device=cpu|cuda] [--no_eval]
      writes OUT/args.json (these settings), OUT/train_log.jsonl (one line per update: step,
      epoch, loss, lr, grad_norm) and OUT/eval_results.json (dev loss and accuracy per epoch).

What distlm does and this copies: lower-cased WordPiece pairs truncated longest-first to
max_seq_length; each epoch's order torch.randperm(n) from a generator seeded seed + epoch
(epochs from 0, as DistributedSampler); batches in that order, the last one partial, each
padded to its longest pair; torch.optim.AdamW (eps 1e-8, weight decay 0: distlm's
--optim=adamw_torch); the learning rate linear from lr to 0 over all updates, no warm-up;
gradients clipped to norm 1.0; eager attention (distlm's math, not SDPA); evaluation in file
order, batch 8. Dropout draws its own masks on each side, so with dropout on only accuracy
can be compared; --dropout=0 makes every loss comparable.
"""
import argparse
import csv
import json
import math
import os
import shutil
import sys
import time

import torch
import transformers
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

transformers.utils.logging.disable_progress_bar()  # one summary line per program, no bars

LABELS = ["entailment", "not_entailment"]  # distlm's RteProcessor.GetLabels()


def read_rte(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    head = rows[0]
    a, b, y = head.index("sentence1"), head.index("sentence2"), head.index("label")
    return [(r[a], r[b], LABELS.index(r[y])) for r in rows[1:]]


def encode(tok, rows, max_len):
    enc = tok([r[0] for r in rows], [r[1] for r in rows], truncation="longest_first", max_length=max_len)
    return [(enc["input_ids"][i], enc["token_type_ids"][i], rows[i][2]) for i in range(len(rows))]


def collate(feats, device):
    longest = max(len(f[0]) for f in feats)
    ids = torch.zeros(len(feats), longest, dtype=torch.long)
    types = torch.zeros_like(ids)
    mask = torch.zeros_like(ids)
    for i, (x, t, _) in enumerate(feats):
        ids[i, : len(x)] = torch.tensor(x)
        types[i, : len(t)] = torch.tensor(t)
        mask[i, : len(x)] = 1
    labels = torch.tensor([f[2] for f in feats])
    return {k: v.to(device) for k, v in
            dict(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels).items()}


def write_init(args):
    torch.manual_seed(args.seed)
    model = BertForSequenceClassification.from_pretrained(args.model, num_labels=2, attn_implementation="eager")
    tmp = args.init_out + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    shutil.copy(os.path.join(args.model, "vocab.txt"), tmp)
    shutil.rmtree(args.init_out, ignore_errors=True)
    os.rename(tmp, args.init_out)
    print(f"hf_finetune: {args.init_out}: {args.model} with a 2-label head drawn under seed {args.seed}")


def evaluate(model, dev, device):
    model.eval()
    correct, loss_sum = 0, 0.0
    with torch.no_grad():
        for s in range(0, len(dev), 8):
            batch = collate(dev[s : s + 8], device)
            out = model(**batch)
            loss_sum += out.loss.item() * len(batch["labels"])
            correct += (out.logits.argmax(-1) == batch["labels"]).sum().item()
    model.train()
    return correct / len(dev), loss_sum / len(dev)


def train(args):
    device = torch.device(args.device)
    tok = BertTokenizerFast(os.path.join(args.model, "vocab.txt"), do_lower_case=True)
    train_set = encode(tok, read_rte(os.path.join(args.data_dir, "train.tsv")), args.max_seq_length)
    dev = encode(tok, read_rte(os.path.join(args.data_dir, "dev.tsv")), args.max_seq_length)
    config = BertConfig.from_pretrained(args.model)
    if args.dropout != "keep":
        config.hidden_dropout_prob = config.attention_probs_dropout_prob = float(args.dropout)
    config.num_labels = 2
    torch.manual_seed(args.seed)
    model = BertForSequenceClassification.from_pretrained(args.model, config=config, attn_implementation="eager")
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, eps=1e-8, weight_decay=0.0)
    per_epoch = math.ceil(len(train_set) / args.batch)
    total = args.max_steps if args.max_steps > 0 else per_epoch * args.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: max(0.0, (total - step) / total))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "args.json"), "w") as f:  # what the parity test repeats in distlm
        json.dump(dict(vars(args), updates=total), f, indent=1)
    log = open(os.path.join(args.out, "train_log.jsonl"), "w")
    evals, step = [], 0
    for epoch in range(args.epochs):
        if step >= total:
            break
        g = torch.Generator()
        g.manual_seed(args.seed + epoch)
        order = torch.randperm(len(train_set), generator=g).tolist()
        start = time.time()
        for s in range(0, len(order), args.batch):
            if step >= total:
                break
            batch = collate([train_set[i] for i in order[s : s + args.batch]], device)
            lr = sched.get_last_lr()[0]
            loss = model(**batch).loss
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            log.write(json.dumps({"step": step, "epoch": epoch + 1, "loss": loss.item(), "lr": lr,
                                  "grad_norm": norm.item()}) + "\n")
        if args.no_eval:
            continue
        acc, dev_loss = evaluate(model, dev, device)
        evals.append({"epoch": epoch + 1, "accuracy": acc, "loss": dev_loss, "examples": len(dev),
                      "epoch_time_s": time.time() - start})
        print(f"hf_finetune: epoch {epoch + 1}: dev accuracy {acc:.4f}, loss {dev_loss:.4f} "
              f"({time.time() - start:.1f} s)", flush=True)
    log.close()
    with open(os.path.join(args.out, "eval_results.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__, "evals": evals}, f, indent=1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--init_out", default="")
    p.add_argument("--data_dir", default="")
    p.add_argument("--out", default="")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--dropout", default="keep")
    p.add_argument("--max_steps", type=int, default=-1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--no_eval", action="store_true", help="skip the dev evaluation after each epoch")
    args = p.parse_args()
    if args.init_out:
        write_init(args)
    elif args.data_dir and args.out:
        train(args)
    else:
        sys.exit("hf_finetune: pass --init_out, or --data_dir and --out")


if __name__ == "__main__":
    main()
