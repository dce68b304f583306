"""Reads distlm's TensorBoard event files with TensorBoard's own reader and checks them against
the run's train_log.jsonl and eval_results.json, OK / NOT OK per run with the worst difference.

  tensorboard_check.py RUN_OUTPUT_DIR...

Each RUN_OUTPUT_DIR holds runs/<name>/events.out.tfevents.* (written with --report_to=tensorboard),
train_log.jsonl and eval_results.json. Every number of every log line must be the scalar
train/<key> at that line's step, and every number of every evaluation eval/<key> at the step the
evaluation followed, each equal to the value rounded to float32 (the event's simple_value); the
run's arguments must be the text "args". Exits 1 if any run is NOT OK.
"""
import glob
import json
import os
import struct
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator, TENSORS
from tensorboard.util import tensor_util

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_runs import check_each  # noqa: E402  (a sibling module)


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def check(out_dir):
    runs = glob.glob(os.path.join(out_dir, "runs", "*"))
    if len(runs) != 1:
        return f"want one run folder in {out_dir}/runs, found {runs}"
    # Every scalar kept (the default keeps a sample of 1000 per tag).
    ea = EventAccumulator(runs[0], size_guidance={"scalars": 0, TENSORS: 0})
    ea.Reload()
    got = {tag: {e.step: e.value for e in ea.Scalars(tag)} for tag in ea.Tags()["scalars"]}
    want = {}
    for line in open(os.path.join(out_dir, "train_log.jsonl")):
        row = json.loads(line)
        for k, v in row.items():
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool):
                want.setdefault("train/" + k, {})[row["step"]] = v
    evals = json.load(open(os.path.join(out_dir, "eval_results.json")))
    # The evaluations in order, each at the update it followed (a step of the log).
    eval_steps = sorted(got.get("eval/accuracy", {}))
    if len(eval_steps) != len(evals) or not set(eval_steps) <= set(want["train/loss"]):
        return f"evaluations at steps {eval_steps} in the event file; {len(evals)} in eval_results.json"
    for step, e in zip(eval_steps, evals):
        for k, v in e.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                want.setdefault("eval/" + k, {})[step] = v
    missing = sorted(set(want) - set(got))
    if missing:
        return f"tags missing from the event file: {missing[:5]}"
    n = 0
    for tag, points in want.items():
        if set(points) != set(got[tag]):
            return f"{tag}: steps {sorted(got[tag])[:8]} in the event file, {sorted(points)[:8]} in the log"
        for step, v in points.items():
            if got[tag][step] != f32(v):
                return f"{tag} at step {step}: {got[tag][step]!r} in the event file, {v!r} in the log"
            n += 1
    args = tensor_util.make_ndarray(ea.Tensors("args")[0].tensor_proto).ravel()[0].decode()
    if "| learning_rate |" not in args:
        return "the text 'args' has no learning_rate row: " + args[:200]
    return f"{n} scalars in {len(want)} tags equal to the log's, the arguments as text ({os.path.basename(runs[0])})"


def main():
    check_each(check, lambda v: " equal to the log's" in v, sys.argv[1:])


if __name__ == "__main__":
    main()
