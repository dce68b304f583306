#!/usr/bin/env bash
# real_rte_table.py --sweep on made-up runs: every setting's column, the best by last-epoch
# accuracy, ties to fewer epochs then the smaller rate, unfinished runs left out, and a clear
# exit when nothing finished. (The sweep itself is hours of training: task4_bench/real_rte.sh.)
set -euo pipefail
table=task4_bench/real_rte_table.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mk() {
  local dir="$work/s/$1"
  shift
  mkdir -p "$dir"
  python3 -c 'import json,sys; json.dump([{"epoch": i + 1, "accuracy": float(a)} for i, a in enumerate(sys.argv[2:])], open(sys.argv[1], "w"))' \
    "$dir/eval_results.json" "$@"
}
mk lr2e-5_ep3 0.55 0.58 0.60
mk lr5e-5_ep3 0.56 0.61 0.64
mk lr1e-4_ep3 0.53 0.52 0.53
mk lr2e-5_ep5 0.55 0.57 0.59 0.62 0.63
mk lr5e-5_ep5 0.57 0.60 0.63 0.65 0.64
mkdir -p "$work/s/lr1e-4_ep5"  # unfinished: no eval_results.json
out=$(python3 "$table" --sweep "$work/s")
echo "$out"
fail() { echo "NOT OK: $1"; exit 1; }
grep -qx '| epoch | lr 2e-5, 3 ep | lr 5e-5, 3 ep | lr 1e-4, 3 ep | lr 2e-5, 5 ep | lr 5e-5, 5 ep |' <<<"$out" ||
  fail "the header names each finished setting, 3-epoch runs first"
grep -qx '| 3 | 0.6000 | 0.6400 | 0.5300 | 0.5900 | 0.6300 |' <<<"$out" || fail "epoch 3's row"
grep -qx '| 5 |  |  |  | 0.6300 | 0.6400 |' <<<"$out" || fail "epoch 5's row leaves the 3-epoch runs empty"
# lr 5e-5 ends at 0.64 after 3 epochs and after 5: the tie goes to the shorter run.
grep -qx 'best: lr 5e-5, 3 epochs, accuracy 0.6400' <<<"$out" || fail "the best setting (a tie: fewer epochs)"
grep -qx 'transformers, RTE dev accuracy after each epoch, per setting (learning rate, epochs)' \
  <<<"$(python3 "$table" --sweep "$work/s" transformers)" || fail "the title names whose grid it is"
rm -rf "$work/s"/lr*
mkdir -p "$work/s/lr2e-5_ep3"
if err=$(python3 "$table" --sweep "$work/s" 2>&1); then fail "no finished run must fail"; fi
grep -q "no finished run under $work/s" <<<"$err" || fail "the message names the folder: $err"
echo "OK: the sweep's table and its best setting"
