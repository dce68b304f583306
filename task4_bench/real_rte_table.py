"""real_rte.sh's tables, from its run folder:

  python real_rte_table.py OUT SOURCE.json STAGE...
  python real_rte_table.py --sweep SWEEP_DIR [WHO]

The sweep's table: dev accuracy per epoch of part 1 at every setting (SWEEP_DIR/lrLR_epE/
eval_results.json), and the best setting by last-epoch accuracy (ties: fewer epochs, then the
smaller learning rate), on a line "best: lr LR, E epochs, accuracy A" that real_rte.sh reads.
WHO names whose runs they are in the title (default: part 1; transformers' grid reads alike).

1. dev accuracy per epoch of every stage that ran (OUT/STAGE/eval_results.json), and the
   published figure (none was found for all-MiniLM-L6-v2 on RTE: its model card reports
   sentence-embedding benchmarks only);
2. from the dropout-off runs (OUT/STAGE_dropout_off/train_log.jsonl), the worst relative
   difference of each update's loss from transformers' (or from part 1's without it).
"""
import json
import os
import sys

LABELS = {"part1": "distlm part 1", "transformers": "transformers", "task2b": "task2b x4", "task3": "task3 x4"}


def evals(path):
    if not os.path.exists(path):
        return None
    data = json.load(open(path))
    return data["evals"] if isinstance(data, dict) else data  # hf_finetune.py's, or distlm's list


def losses(path):
    if not os.path.exists(path):
        return None
    return [json.loads(line)["loss"] for line in open(path)]


def sweep(folder, who="part 1"):
    runs = []
    for name in sorted(os.listdir(folder)):
        parts = name.split("_ep")
        if not name.startswith("lr") or len(parts) != 2 or not os.path.isdir(os.path.join(folder, name)):
            continue
        v = evals(os.path.join(folder, name, "eval_results.json"))
        if v:
            runs.append((float(parts[0][2:]), int(parts[1]), parts[0][2:], v))
    if not runs:
        sys.exit(f"real_rte_table: no finished run under {folder}")
    runs.sort(key=lambda r: (r[1], r[0]))
    print(f"{who}, RTE dev accuracy after each epoch, per setting (learning rate, epochs)")
    print("| epoch | " + " | ".join(f"lr {r[2]}, {r[1]} ep" for r in runs) + " |")
    print("| --- |" + " --- |" * len(runs))
    for e in range(max(len(r[3]) for r in runs)):
        print(f"| {e + 1} | " + " | ".join(f"{r[3][e]['accuracy']:.4f}" if e < len(r[3]) else "" for r in runs) + " |")
    best = max(runs, key=lambda r: (r[3][-1]["accuracy"], -r[1], -r[0]))
    print(f"best: lr {best[2]}, {best[1]} epochs, accuracy {best[3][-1]['accuracy']:.4f}")


def main():
    if sys.argv[1:2] == ["--sweep"]:
        sweep(*sys.argv[2:4])
        return
    out, source, stages = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3:]
    table = {s: evals(os.path.join(out, s, "eval_results.json")) for s in stages}
    table = {s: v for s, v in table.items() if v}
    print(f"all-MiniLM-L6-v2 ({source['package']}=={source['version']}) + a 2-label head, RTE dev "
          "(277 pairs): accuracy after each epoch")
    print("| epoch | " + " | ".join(LABELS.get(s, s) for s in table) + " | published |")
    print("| --- |" + " --- |" * (len(table) + 1))
    for e in range(max((len(v) for v in table.values()), default=0)):
        cells = [f"{v[e]['accuracy']:.4f}" if e < len(v) else "" for v in table.values()]
        print(f"| {e + 1} | " + " | ".join(cells) + " | none found |")
    for s, v in table.items():
        print(f"{LABELS.get(s, s)}: {v[-1].get('epoch_time_s', 0):.1f} s for the last epoch")

    base = "transformers" if "transformers" in stages else "part1"
    ref = losses(os.path.join(out, base + "_dropout_off", "train_log.jsonl"))
    if not ref:
        return
    print(f"\ndropout off, {len(ref)} updates: the worst relative difference of a loss from {LABELS[base]}'")
    for s in stages:
        if s == base:
            continue
        mine = losses(os.path.join(out, s + "_dropout_off", "train_log.jsonl"))
        if not mine or len(mine) != len(ref):
            print(f"  {LABELS.get(s, s)}: missing or of another length")
            continue
        rel = [abs(a - b) / abs(b) for a, b in zip(mine, ref)]
        worst = max(range(len(rel)), key=rel.__getitem__)
        verdict = "OK" if rel[worst] <= 1e-4 else "NOT OK"
        print(f"  {verdict} {LABELS.get(s, s)}: {rel[worst]:.2e} at update {worst + 1} (bound 1e-4)")


if __name__ == "__main__":
    main()
