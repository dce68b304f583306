"""Writes what HuggingFace transformers computes for a BERT checkpoint, for distlm's parity tests.

    python hf_dump.py MODEL_DIR OUT_DIR      (tools/peers/hf_dump.sh sets up the environment)

MODEL_DIR is a HuggingFace-layout BERT folder (config.json, vocab.txt, model.safetensors) with
data/train.tsv (GLUE RTE layout). OUT_DIR receives
  dump.safetensors  init.<name>     every parameter as the runs below started (a classifier the
                                    checkpoint lacks is initialised with torch's seed --seed)
                    input_ids, token_type_ids, attention_mask, labels   the first batch
                    logits, loss    forward of the first batch (eager attention, dropout off)
                    grad.<name>     every parameter's gradient after backward of that mean loss
                    logits_sdpa     the same forward with attention through SDPA
                    trace.loss, trace.grad_norm, trace.lr   per update of the --steps run
                    trace.final_logits                      eval logits of the first batch after it
                    trace_sdpa.*    the same run with SDPA attention (transformers' own spread)
  meta.json         versions, settings, and how far SDPA's logits are from eager's.
The run: batches of --batch_size rows in file order, cycling; torch.optim.AdamW (betas 0.9,
0.999, eps 1e-8, weight decay 0), clip at --max_grad_norm, learning rate linear from --lr to 0
over --steps updates, no warm-up: what run_glue.py does with those flags, less the shuffling.
"""
import argparse
import csv
import json
import os
import platform

import torch
import transformers
from safetensors.torch import save_file
from transformers import BertForSequenceClassification, BertTokenizerFast

transformers.utils.logging.disable_progress_bar()  # one summary line per program, no bars

LABELS = {"entailment": 0, "not_entailment": 1}


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    header, body = rows[0], rows[1:]
    i1, i2, il = header.index("sentence1"), header.index("sentence2"), header.index("label")
    return [(r[i1], r[i2], LABELS[r[il]]) for r in body]


def load_model(model_dir, attn, state=None):
    model = BertForSequenceClassification.from_pretrained(
        model_dir, num_labels=2, attn_implementation=attn,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if state is not None:
        model.load_state_dict(state)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--max_seq_length", type=int, default=64)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--max_grad_norm", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--do_lower_case", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    os.makedirs(a.out_dir, exist_ok=True)

    # transformers 5.x: BertTokenizerFast names the Rust-backed BertTokenizer, built from the
    # folder's vocab.txt (constructing it with vocab_file= silently gives an empty vocabulary).
    tok = BertTokenizerFast.from_pretrained(a.model_dir, do_lower_case=bool(a.do_lower_case))
    rows = read_rows(os.path.join(a.model_dir, "data", "train.tsv"))
    enc = tok([r[0] for r in rows], [r[1] for r in rows], truncation="longest_first",
              max_length=a.max_seq_length, padding="max_length", return_tensors="pt")
    labels = torch.tensor([r[2] for r in rows])

    def batch(k):
        idx = [(k * a.batch_size + j) % len(rows) for j in range(a.batch_size)]
        return (enc["input_ids"][idx], enc["token_type_ids"][idx], enc["attention_mask"][idx], labels[idx])

    torch.manual_seed(a.seed)
    model = load_model(a.model_dir, "eager")
    init = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    out = {"init." + k: v for k, v in init.items()}

    ids, seg, mask, lab = batch(0)
    out.update({"input_ids": ids, "token_type_ids": seg, "attention_mask": mask, "labels": lab})
    model.train()  # dropout is off: train and eval compute the same
    res = model(input_ids=ids, token_type_ids=seg, attention_mask=mask, labels=lab)
    res.loss.backward()
    out["logits"] = res.logits.detach().clone()
    out["loss"] = res.loss.detach().reshape(1).clone()
    for name, p in model.named_parameters():
        out["grad." + name] = (p.grad if p.grad is not None else torch.zeros_like(p)).detach().clone()

    sdpa = load_model(a.model_dir, "sdpa", init)
    sdpa.eval()
    with torch.no_grad():
        out["logits_sdpa"] = sdpa(input_ids=ids, token_type_ids=seg, attention_mask=mask).logits.clone()
    sdpa_diff = (out["logits_sdpa"] - out["logits"]).abs().max().item()

    def trace(attn):
        """The --steps run from init with this attention: losses, norms, lrs, final logits."""
        model = load_model(a.model_dir, attn, init)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, (a.steps - s) / a.steps))
        losses, norms, lrs = [], [], []
        for k in range(a.steps):
            ids_k, seg_k, mask_k, lab_k = batch(k)
            opt.zero_grad()
            loss = model(input_ids=ids_k, token_type_ids=seg_k, attention_mask=mask_k, labels=lab_k).loss
            loss.backward()
            norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), a.max_grad_norm)))
            lrs.append(opt.param_groups[0]["lr"])
            losses.append(loss.item())
            opt.step()
            sched.step()
        model.eval()
        with torch.no_grad():
            final = model(input_ids=ids, token_type_ids=seg, attention_mask=mask).logits.clone()
        return losses, norms, lrs, final

    losses, norms, lrs, out["trace.final_logits"] = trace("eager")
    out["trace.loss"] = torch.tensor(losses, dtype=torch.float64)
    out["trace.grad_norm"] = torch.tensor(norms, dtype=torch.float64)
    out["trace.lr"] = torch.tensor(lrs, dtype=torch.float64)
    # The same run with SDPA attention: transformers against itself, two legitimate float
    # orderings of one computation. How far these drift over the run is the noise floor any
    # second implementation (distlm included) is judged beside.
    s_losses, s_norms, _, out["trace_sdpa.final_logits"] = trace("sdpa")
    out["trace_sdpa.loss"] = torch.tensor(s_losses, dtype=torch.float64)
    out["trace_sdpa.grad_norm"] = torch.tensor(s_norms, dtype=torch.float64)
    rel = lambda x, y: max(abs(p - q) / abs(q) for p, q in zip(x, y))
    sdpa_trace_drift = {"loss": rel(s_losses, losses), "grad_norm": rel(s_norms, norms),
                        "final_logits": ((out["trace_sdpa.final_logits"] - out["trace.final_logits"]).abs().max()
                                         / out["trace.final_logits"].abs().max()).item()}

    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(a.out_dir, "dump.safetensors"))
    meta = {
        "model_dir": os.path.abspath(a.model_dir),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "python": platform.python_version(), "threads": torch.get_num_threads(),
        "settings": vars(a), "rows": len(rows),
        "tokenizer": type(tok).__name__, "optimizer": "torch.optim.AdamW",
        "sdpa_vs_eager_max_abs_logit_diff": sdpa_diff,
        "sdpa_vs_eager_trace_max_rel_diff": sdpa_trace_drift,
        "loss": out["loss"].item(), "trace_loss": losses,
    }
    with open(os.path.join(a.out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
    print(f"hf_dump: {len(rows)} rows, loss {out['loss'].item():.6f}, {a.steps} steps "
          f"(last loss {losses[-1]:.6f}), SDPA vs eager logits {sdpa_diff:.2e}, trace losses "
          f"{sdpa_trace_drift['loss']:.2e} relative; wrote {a.out_dir}")


if __name__ == "__main__":
    main()
