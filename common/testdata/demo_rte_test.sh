#!/usr/bin/env bash
# common/testdata/rte_demo is exactly what make_demo_rte.py writes, balanced, and every word of it
# is in vocab.txt (a new word would become [UNK] and the demo would quietly learn less).
set -euo pipefail
dir=common/testdata
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python3 "$dir/make_demo_rte.py" "$out"
fail=0
for f in train.tsv dev.tsv; do
  if cmp -s "$out/$f" "$dir/rte_demo/$f"; then echo "OK      rte_demo/$f is what make_demo_rte.py writes"
  else echo "NOT OK  rte_demo/$f differs from what make_demo_rte.py writes: run it again and commit"; fail=1; fi
done
python3 - "$dir/vocab.txt" "$dir/rte_demo" <<'PY' || fail=1
import re, sys
vocab = set(open(sys.argv[1], encoding="utf-8").read().split())
bad = 0
for name, n in (("train.tsv", 800), ("dev.tsv", 200)):
    rows = [l.rstrip("\n").split("\t") for l in open(f"{sys.argv[2]}/{name}", encoding="utf-8")][1:]
    labels = [r[3] for r in rows]
    ok = len(rows) == n and labels.count("entailment") == n // 2
    print(("OK     " if ok else "NOT OK ") + f" {name}: {len(rows)} pairs, {labels.count('entailment')} entailment")
    bad += not ok
    missing = sorted({w for r in rows for w in re.findall(r"[a-z]+", (r[1] + " " + r[2]).lower())} - vocab)
    print(("OK     " if not missing else "NOT OK ") + f" {name}: words not in vocab.txt: {missing}")
    bad += bool(missing)
sys.exit(1 if bad else 0)
PY
exit "$fail"
