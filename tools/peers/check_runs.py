"""The verdict loop the checks of distlm's outputs share (tensorboard_check.py,
trace_viewer_check.py): one OK / NOT OK line per run folder."""
import sys


def check_each(check, is_ok, out_dirs):
    """check(out_dir) -> a sentence; is_ok(sentence) -> whether it is a pass. An exception from a
    reader is a NOT OK (it is the finding). Exits 1 if any run is NOT OK."""
    bad = 0
    for out_dir in out_dirs:
        try:
            verdict = check(out_dir)
            ok = is_ok(verdict)
        except Exception as e:  # noqa: BLE001
            verdict, ok = f"{type(e).__name__}: {e}", False
        bad += not ok
        print(f"{'OK' if ok else 'NOT OK':6} {out_dir}: {verdict}")
    sys.exit(1 if bad else 0)
