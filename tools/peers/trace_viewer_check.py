"""Reads distlm's per-rank --trace files with HolisticTraceAnalysis (HTA, PyPI), the trace
analyser PyTorch's own profiler traces are read with, and checks that it sees every rank and
every event of each: OK / NOT OK per run.

  trace_viewer_check.py RUN_OUTPUT_DIR...

Each RUN_OUTPUT_DIR holds trace/rank-R-of-N.json (a stage run with --trace) and trace/merged.json
(//tools:trace). For every rank HTA must report as many events as the rank's file has complete
("X") events, the same names and the same total duration, the stage's collectives among them;
and //tools:trace's merged file must hold the same events. Exits 1 if any run is NOT OK.
"""
import glob
import json
import os
import shutil
import sys
import tempfile
from collections import Counter

from hta.trace_analysis import TraceAnalysis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_runs import check_each  # noqa: E402  (a sibling module)


def complete_events(trace, pid=None):
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and (pid is None or e["pid"] == pid)]


def check(out_dir):
    files = sorted(glob.glob(os.path.join(out_dir, "trace", "rank-*-of-*.json")))
    if not files:
        return "no trace/rank-*-of-*.json"
    merged = json.load(open(os.path.join(out_dir, "trace", "merged.json")))
    with tempfile.TemporaryDirectory() as d:
        # HTA reads every .json of a folder as one rank's trace: the rank files alone.
        for f in files:
            shutil.copy(f, d)
        t = TraceAnalysis(trace_dir=d).t
        ranks = sorted(t.traces)
        if ranks != list(range(len(files))):
            return f"HTA read ranks {ranks} from {len(files)} files"
        said = []
        for rank, f in enumerate(files):
            ours = complete_events(json.load(open(f)))
            df = t.traces[rank]
            names = Counter(t.symbol_table.sym_table[i] for i in df["name"])
            if len(df) != len(ours) or names != Counter(e["name"] for e in ours):
                return f"rank {rank}: HTA read {len(df)} events, the file has {len(ours)} (names differ: " \
                       f"{sorted((names - Counter(e['name'] for e in ours)).items())[:3]})"
            # HTA keeps whole microseconds (it rounds times with ns resolution down: up to 1 us off
            # for each event's start and end).
            total_hta, total_file = float(df["dur"].sum()), sum(e["dur"] for e in ours)
            if abs(total_hta - total_file) > 2 * len(ours):
                return f"rank {rank}: HTA's events last {total_hta:.0f} us in all, the file's {total_file:.0f}"
            comms = [n for n in names if n in ("allreduce", "allgather", "reduce_scatter", "broadcast")]
            if not comms:
                return f"rank {rank}: no collective among the events HTA read"
            merged_rank = complete_events(merged, rank)
            if len(merged_rank) != len(ours):
                return f"rank {rank}: merged.json has {len(merged_rank)} of its {len(ours)} events"
            said.append(f"rank {rank}: {len(df)} events ({', '.join(sorted(comms))})")
    return f"HTA read all {len(files)} ranks; " + "; ".join(said)


def main():
    check_each(check, lambda v: v.startswith("HTA read all"), sys.argv[1:])


if __name__ == "__main__":
    main()
