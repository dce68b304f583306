"""A tiny random ViT and what transformers computes on it, for //common/parity:vit_hf_parity_test.

  python hf_vit_dump.py OUT

OUT/model             config.json + model.safetensors: ViTForImageClassification in
                      TinyViTConfig's shape (32x32 images, 8x8 patches, hidden 64, 2 layers,
                      2 heads, intermediate 128, 10 labels, no dropout), torch.manual_seed(0)
OUT/dump.safetensors  batches.pixel_values [12, 4, 3, 32, 32] and batches.labels [12, 4]
                      (torch.manual_seed(1)); logits and loss of batch 0; grad.NAME, every
                      parameter's gradient of that loss; trace.loss [12], the losses of 12
                      updates of torch.optim.AdamW (lr 1e-3 linear to 0, eps 1e-8, weight
                      decay 0, gradients clipped to norm 1.0), update i on batch i
OUT/meta.json         the versions and settings
Eager attention (transformers' own maths, the one distlm follows).
"""
import copy
import json
import os
import shutil
import sys

import re

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import ViTConfig, ViTForImageClassification

transformers.utils.logging.disable_progress_bar()  # one summary line per program, no bars

STEPS, LR = 12, 1e-3

# transformers 5 names ViT's modules in memory otherwise than in its checkpoints, which keep the
# classic names (the ones distlm's model has): in-memory name -> checkpoint name.
RENAMES = [(r"^vit\.layers\.(\d+)\.", r"vit.encoder.layer.\1."), (r"\.attention\.q_proj\.", ".attention.attention.query."),
           (r"\.attention\.k_proj\.", ".attention.attention.key."), (r"\.attention\.v_proj\.", ".attention.attention.value."),
           (r"\.attention\.o_proj\.", ".attention.output.dense."), (r"\.mlp\.fc1\.", ".intermediate.dense."),
           (r"\.mlp\.fc2\.", ".output.dense.")]


def checkpoint_names(model, saved):
    """Each parameter's name in the saved checkpoint, checked: every name exists there with the
    parameter's exact values, and no two parameters share one."""
    names = {}
    for name, p in model.named_parameters():
        target = name
        if target not in saved:
            for pattern, repl in RENAMES:
                target = re.sub(pattern, repl, target)
        if target not in saved or not torch.equal(saved[target], p.detach()):
            sys.exit(f"hf_vit_dump: parameter {name} is not {target} in the saved checkpoint")
        names[name] = target
    if len(set(names.values())) != len(names) or set(names.values()) != set(saved):
        sys.exit("hf_vit_dump: the parameters do not map one to one onto the checkpoint's tensors")
    return names


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: hf_vit_dump.py OUT (see the top of the file)")
    out = sys.argv[1].rstrip("/")
    tmp = out + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    config = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=128, hidden_act="gelu",
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=10)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = ViTForImageClassification(config).eval()
    model.save_pretrained(os.path.join(tmp, "model"), safe_serialization=True)
    names = checkpoint_names(model, load_file(os.path.join(tmp, "model", "model.safetensors")))

    torch.manual_seed(1)
    pixels = torch.randn(STEPS, 4, 3, 32, 32)
    labels = torch.randint(0, 10, (STEPS, 4))
    tensors = {"batches.pixel_values": pixels, "batches.labels": labels}

    start = copy.deepcopy(model.state_dict())
    out0 = model(pixel_values=pixels[0], labels=labels[0])
    out0.loss.backward()
    tensors["logits"] = out0.logits.detach()
    tensors["loss"] = out0.loss.detach().reshape(1)
    for name, p in model.named_parameters():
        tensors["grad." + names[name]] = p.grad.detach().clone()

    model.load_state_dict(start)
    model.zero_grad(set_to_none=True)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, eps=1e-8, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: (STEPS - step) / STEPS)
    losses = []
    for i in range(STEPS):
        loss = model(pixel_values=pixels[i], labels=labels[i]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    tensors["trace.loss"] = torch.tensor(losses, dtype=torch.float64)
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(tmp, "dump.safetensors"))
    with open(os.path.join(tmp, "meta.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__, "steps": STEPS, "lr": LR,
                   "schedule": "linear to 0, no warm-up", "optimizer": "torch.optim.AdamW eps 1e-8 wd 0",
                   "clip": 1.0, "attention": "eager"}, f, indent=1)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    print(f"hf_vit_dump: {out}: loss {out0.loss.item():.6f}, trace {losses[0]:.6f} .. {losses[-1]:.6f}")


if __name__ == "__main__":
    main()
