"""Ingest benchmark: synthetic Kineto traces of N events -> MB/s, events/s, peak RSS.

Each size runs in a fresh subprocess so peak RSS is that ingest's alone. Usage:
    .venv/bin/python bench/ingest.py [--events 100000 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth import write_kineto_trace  # noqa: E402

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from explorer.service import ingest_paths
from explorer.store.runs import RunStore
store = RunStore(Path(sys.argv[2]))
t = time.perf_counter()
rec = ingest_paths(store, [Path(sys.argv[1])], "bench")
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "slices": rec.summary["slices"], "flows": rec.summary["flows"],
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def run_one(n_events: int, workdir: Path) -> dict[str, float]:
    trace = workdir / f"synthetic_{n_events}.json"
    size = write_kineto_trace(trace, n_events)
    out = subprocess.run([sys.executable, "-c", CHILD, str(trace), str(workdir / f"data_{n_events}")],
                         check=True, capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result.update({"events": n_events, "bytes": size})
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, nargs="+", default=[100_000, 1_000_000])
    args = parser.parse_args()
    print(f"{'events':>10} {'size MB':>8} {'seconds':>8} {'MB/s':>7} {'events/s':>10} {'peak RSS MB':>11} "
          f"{'RSS/size':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.events:
            t0 = time.perf_counter()
            r = run_one(n, Path(tmp))
            mb = r["bytes"] / 1e6
            print(f"{n:>10,} {mb:>8.1f} {r['seconds']:>8.2f} {mb / r['seconds']:>7.1f} "
                  f"{n / r['seconds']:>10,.0f} {r['peak_rss_bytes'] / 1e6:>11.0f} "
                  f"{r['peak_rss_bytes'] / r['bytes']:>8.2f}", flush=True)
            del t0


if __name__ == "__main__":
    main()
