"""Perfetto export benchmark: seconds, MB/s of JSON written and peak RSS of `trace-explorer export` on
synthetic Kineto runs (bench/synth.py), each exported in a fresh process after the ingest.

    .venv/bin/python bench/export.py [--events 100000,1000000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from synth import write_kineto_trace  # noqa: E402

from explorer.runs.ingest import ingest_paths  # noqa: E402
from explorer.store.runs import RunStore  # noqa: E402

EXPORT = """
import sys, time
from pathlib import Path
from explorer.report.perfetto import write_perfetto_json
from explorer.runs.run import load_device_timeline
from explorer.store.runs import RunStore
def hwm_kib():  # this process's own peak (ru_maxrss would carry the parent's peak across exec)
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
store = RunStore(Path(sys.argv[1]))
before = hwm_kib()
t0 = time.perf_counter()
with open(sys.argv[3], "wb") as fh:
    size = write_perfetto_json(store, sys.argv[2], fh, load_device_timeline(store, sys.argv[2]))
print(time.perf_counter() - t0, size, before, hwm_kib())
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", default="100000,1000000")
    args = ap.parse_args()
    print("| events | slices | export MB | seconds | MB/s | peak RSS MiB (before) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.events.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            write_kineto_trace(d / "trace.json", n)
            store = RunStore(d / "data")
            rec = ingest_paths(store, [d / "trace.json"], f"synth {n}")
            out = subprocess.run([sys.executable, "-c", EXPORT, str(d / "data"), rec.id, str(d / "out.json")],
                                 capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent.parent)
            secs, size, before, peak = (float(x) for x in out.stdout.split())
            print(f"| {n:,} | {rec.summary.slices:,} | {size / 1e6:,.1f} | {secs:.2f} | {size / 1e6 / secs:.0f} | "
                  f"{peak / 1024:.0f} ({before / 1024:.0f}) |", flush=True)


if __name__ == "__main__":
    main()
