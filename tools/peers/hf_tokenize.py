"""Turns every RTE train and dev pair into BERT ids with transformers' tokenizers, for parity tests.

    python hf_tokenize.py VOCAB RTE_DIR OUT_DIR [--reference_dir=DIR]   (hf_tokenize.sh sets up the env)

For do_lower_case 1 (uncased) and 0 (cased) and max_length 128 and 48, the Rust-backed
BertTokenizerFast encodes sentence1/sentence2 of RTE_DIR/train.tsv then dev.tsv, in file order,
truncation "longest_first", no padding, into
  OUT_DIR/rte_{uncased,cased}_max{128,48}.jsonl
      {"split": "train"|"dev", "index": <the row's index column>, "input_ids": [...], "segment_ids": [...]}
  OUT_DIR/disagreements.json   every pair where transformers' pure-Python BERT tokenizer
      (BertTokenizerLegacy in 5.x) gives other ids, with the first differing position and tokens
  OUT_DIR/reference_disagreements.json   with --reference_dir (../shared/reference/tokenizer):
      every max128 pair where the 2019 reference's input_ids or segment_ids differ from ours

How longest_first splits the budget M = max_length - 3 when a pair is too long, found by probing
tokenizers 0.23.3 with x/y runs (sentence1 0..15, sentence2 1..15 pieces, M 1..18), not docs:
  Rust (BertTokenizerFast): with s the shorter length (sentence1 counts as the shorter on a
    tie), the shorter is kept whole if s <= M - s and the longer cut to M - s; otherwise the
    shorter gets floor(M/2) and the longer ceil(M/2): the odd token goes to the longer
    sentence, to sentence2 on a tie.
  2019 reference (_truncate_seq_pair; distlm's TruncateSeqPair) and the Python tokenizer here:
    pop the last piece of the longer list, of sentence2 on a tie, until it fits; when both end
    up cut, sentence1 keeps ceil(M/2) and sentence2 floor(M/2) whichever was longer.
  They differ exactly when M is odd, s >= ceil(M/2) and sentence2 is at least as long as
  sentence1: Rust then keeps one piece fewer of sentence1 and one more of sentence2. M is odd
  for both 128 and 48; truncate_2019 below tells such pairs from word-piece differences.
An empty sentence2 is another difference (none in RTE): BertTokenizerFast encodes
"[CLS] a [SEP]" as the reference does, the Python tokenizer "[CLS] a [SEP] [SEP]".
"""
import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
import time

import transformers
from transformers import BertTokenizerFast

try:  # transformers 5.x keeps the pure-Python BERT tokenizer under this name
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as SlowTokenizer
except ImportError:
    SlowTokenizer = None

CASES = (("uncased", 1), ("cased", 0))
MAX_LENGTHS = (128, 48)


def read_pairs(rte_dir):
    pairs = []
    for split in ("train", "dev"):
        with open(os.path.join(rte_dir, split + ".tsv"), newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
        h = rows[0]
        ix, i1, i2 = h.index("index"), h.index("sentence1"), h.index("sentence2")
        pairs += [(split, int(r[ix]), r[i1], r[i2]) for r in rows[1:]]
    return pairs


def encode(tok, pairs, max_length):
    """(input_ids, segment_ids) per pair; one call per pair, the way a data loader would."""
    out = []
    for _, _, a, b in pairs:
        e = tok(a, b, truncation="longest_first", max_length=max_length, return_token_type_ids=True)
        out.append((e["input_ids"], e["token_type_ids"]))
    return out


def truncate_2019(a, b, budget):
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        (a if len(a) > len(b) else b).pop()
    return a, b


def first_diff(x, y):
    for i, (u, v) in enumerate(zip(x, y)):
        if u != v:
            return i
    return min(len(x), len(y))


def describe(tok, pair, case, max_length, ours, theirs, names):
    """One disagreement: where the id lists part and why (word pieces or the truncation rule)."""
    (split, index, a, b), (ids, seg), (ids2, seg2) = pair, ours, theirs
    pos = first_diff(ids, ids2) if ids != ids2 else first_diff(seg, seg2)
    tokens = lambda l: tok.convert_ids_to_tokens(l[pos]) if pos < len(l) else None
    pa = tok(a, add_special_tokens=False)["input_ids"]
    pb = tok(b, add_special_tokens=False)["input_ids"]
    ta, tb = truncate_2019(pa, pb, max_length - 3)
    cls, sep = tok.cls_token_id, tok.sep_token_id
    reason = "truncation" if ids2 == [cls] + ta + [sep] + tb + [sep] else "word pieces"
    return {"split": split, "index": index, "case": case, "max_length": max_length,
            "reason": reason, "sentence1_pieces": len(pa), "sentence2_pieces": len(pb),
            "first_diff": pos, names[0] + "_token": tokens(ids), names[1] + "_token": tokens(ids2),
            names[0] + "_ids": ids, names[1] + "_ids": ids2,
            names[0] + "_segment_ids": seg, names[1] + "_segment_ids": seg2}


def read_reference(path):
    ref = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            split, index = r["guid"].split("-")  # "train-0": GLUE's guid, set then index column
            ref[(split, int(index))] = (r["input_ids"], r["segment_ids"])
    return ref


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("vocab")
    ap.add_argument("rte_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--reference_dir", default="", help="folder with the 2019 rte_*_max128.jsonl")
    a = ap.parse_args()
    for p in (a.vocab, os.path.join(a.rte_dir, "train.tsv"), os.path.join(a.rte_dir, "dev.tsv")):
        if not os.path.isfile(p):
            print(f"hf_tokenize: {p}: no such file", file=sys.stderr)
            sys.exit(2)
    transformers.logging.set_verbosity_error()  # the slow path warns about overflow per call
    os.makedirs(a.out_dir, exist_ok=True)
    pairs = read_pairs(a.rte_dir)
    disagreements, ref_diffs, timing, summary = [], [], {}, []

    with tempfile.TemporaryDirectory() as tmp:
        # transformers 5.x: BertTokenizerFast(vocab_file=...) silently builds an empty
        # vocabulary; from_pretrained on a folder holding vocab.txt reads it.
        shutil.copyfile(a.vocab, os.path.join(tmp, "vocab.txt"))
        for case, lower in CASES:
            fast = BertTokenizerFast.from_pretrained(tmp, do_lower_case=bool(lower))
            slow = SlowTokenizer.from_pretrained(tmp, do_lower_case=bool(lower)) if SlowTokenizer else None
            for m in MAX_LENGTHS:
                t0 = time.perf_counter()
                enc = encode(fast, pairs, m)
                timing[f"fast_{case}_max{m}_s"] = time.perf_counter() - t0
                name = f"rte_{case}_max{m}.jsonl"
                with open(os.path.join(a.out_dir, name), "w") as f:
                    for (split, index, _, _), (ids, seg) in zip(pairs, enc):
                        f.write(json.dumps({"split": split, "index": index, "input_ids": ids,
                                            "segment_ids": seg}) + "\n")
                line = f"{name}: {len(enc)} pairs, {sum(len(e[0]) == m for e in enc)} at max_length"
                if slow is not None:
                    t0 = time.perf_counter()
                    enc_slow = encode(slow, pairs, m)
                    timing[f"slow_{case}_max{m}_s"] = time.perf_counter() - t0
                    n0 = len(disagreements)
                    disagreements += [describe(fast, p, case, m, f, s, ("fast", "slow"))
                                      for p, f, s in zip(pairs, enc, enc_slow) if f != s]
                    line += f", {len(disagreements) - n0} differ from the Python tokenizer"
                ref_path = os.path.join(a.reference_dir, f"rte_{case}_max{m}.jsonl")
                if a.reference_dir and os.path.isfile(ref_path):
                    ref = read_reference(ref_path)
                    missing = sum((p[0], p[1]) not in ref for p in pairs)
                    n0 = len(ref_diffs)
                    ref_diffs += [describe(fast, p, case, m, f, ref[(p[0], p[1])], ("fast", "reference"))
                                  for p, f in zip(pairs, enc)
                                  if (p[0], p[1]) in ref and f != ref[(p[0], p[1])]]
                    by = {}
                    for d in ref_diffs[n0:]:
                        by[d["reason"]] = by.get(d["reason"], 0) + 1
                    line += f", {len(ref_diffs) - n0} differ from the 2019 reference {by}"
                    line += f" ({missing} missing there)" if missing else ""
                summary.append(line)

    with open(os.path.join(a.out_dir, "disagreements.json"), "w") as f:
        json.dump({"slow_tokenizer": SlowTokenizer.__name__ if SlowTokenizer else None,
                   "fast_tokenizer": BertTokenizerFast.__name__,
                   "transformers": transformers.__version__, "pairs": len(pairs),
                   "timing_s": timing, "disagreements": disagreements}, f, indent=1)
    if a.reference_dir:
        with open(os.path.join(a.out_dir, "reference_disagreements.json"), "w") as f:
            json.dump({"reference_dir": os.path.abspath(a.reference_dir), "disagreements": ref_diffs}, f, indent=1)
    for line in summary:
        print("  " + line)
    fast_s = sum(v for k, v in timing.items() if k.startswith("fast"))
    slow_s = sum(v for k, v in timing.items() if k.startswith("slow"))
    print(f"hf_tokenize: {len(pairs)} pairs x {len(CASES) * len(MAX_LENGTHS)} settings in {fast_s:.1f} s (Rust); "
          + (f"{len(disagreements)} differ from {SlowTokenizer.__name__} ({slow_s:.1f} s)"
             if SlowTokenizer else "no Python tokenizer in this transformers")
          + (f"; {len(ref_diffs)} differ from the 2019 reference" if a.reference_dir else "")
          + f"; wrote {a.out_dir}")


if __name__ == "__main__":
    main()
