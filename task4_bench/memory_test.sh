#!/usr/bin/env bash
# //task4_bench:memory_test -- the memory table at test size (the tiny BERT, 1 update, ranks 1
# and 2, parts 1, tasks 5 and 6), its bytes per parameter against the closed forms: part 1 holds
# 16; task 6 16/N (its units' padding is at most N-1 elements each); task 5 4 + 12/N plus the
# whole flat gradient buffer it keeps beside its shard (4 more), which the table names.
set -euo pipefail
memory=$1
out=${TEST_TMPDIR:-/tmp}/memory_test
rm -rf "$out"
"$memory" --out="$out" --model=bert --ranks=1,2 --updates=1 --stages=part1,task5,task6 > "$out.log" 2>&1 || {
  cat "$out.log"; echo "memory_test: the table's runs failed"; exit 1; }
python3 - "$out" <<'PY'
import csv, sys
rows = {(r["stage"], int(r["ranks"])): r for r in csv.DictReader(open(sys.argv[1] + "/memory.csv"))}
want = {("part1", 1): 16.0, ("task5", 1): 16.0 + 4, ("task5", 2): 4 + 12 / 2 + 4, ("task6", 1): 16.0, ("task6", 2): 8.0}
bad = []
for key, b in want.items():
    r = rows.get(key)
    if r is None:
        bad.append(f"{key}: no row"); continue
    got = float(r["measured_bytes_per_param"])
    # Padding: at most N-1 elements per unit (4 units) or per flat buffer, over 561026 parameters.
    if abs(got - b) > 16 * 4 * key[1] / 561026 + 1e-4:
        bad.append(f"{key}: {got:.4f} bytes per parameter, expected {b:.4f}")
    print(f"{key[0]} N={key[1]}: {got:.4f} B/param (closed form {b:.4f}), peak {int(r['mem_peak_bytes'])/1e6:.1f} MB")
md = open(sys.argv[1] + "/memory.md").read()
if "task 5 does not do" not in md:
    bad.append("memory.md does not say where task 5's extra gradient bytes are")
if bad:
    print("NOT OK:\n  " + "\n  ".join(bad)); sys.exit(1)
print("OK")
PY
