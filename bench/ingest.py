"""Ingest benchmark: synthetic Kineto traces of N events -> MB/s, events/s, peak RSS.

Each size runs in a fresh subprocess so peak RSS is that ingest's alone. With --peer-python, the
same file is also loaded by HolisticTraceAnalysis (TraceAnalysis(trace_dir=...)) in that
interpreter, side by side, and the ratio is printed. HTA is not a dependency of this project:
install it in a separate environment (`python -m venv hta && hta/bin/pip install
holistictraceanalysis "pandas<3"`). Usage:
    .venv/bin/python bench/ingest.py [--events 100000 1000000] [--peer-python hta/bin/python]
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
print(json.dumps({"seconds": dt, "slices": rec.summary.slices, "flows": rec.summary.flows,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


PEER = r"""
import json, resource, sys, time
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
TraceAnalysis(trace_dir=sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def run_peer(python: str, trace: Path) -> dict[str, float]:
    """HTA loading the same trace (alone in its folder, as rank 0), in its own interpreter."""
    folder = trace.parent / f"hta_{trace.stem}"
    folder.mkdir(exist_ok=True)
    link = folder / "rank-0.json"
    if not link.exists():
        link.symlink_to(trace)
    out = subprocess.run([python, "-c", PEER, str(folder)], check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run_one(n_events: int, workdir: Path) -> dict[str, float]:
    trace = workdir / f"synthetic_{n_events}.json"
    size = write_kineto_trace(trace, n_events)
    out = subprocess.run([sys.executable, "-c", CHILD, str(trace), str(workdir / f"data_{n_events}")],
                         check=True, capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result.update({"events": n_events, "bytes": size, "trace": str(trace)})
    return result


def print_split(data_dir: Path) -> None:
    """The ingest's own time split (explorer.ingest.split, in each run's meta), slowest step first."""
    for run_json in sorted(data_dir.glob("runs/*/run.json")):
        split: dict[str, int] = json.loads(run_json.read_text())["meta"].get("ingest_split_ns", {})
        steps = sorted(split.items(), key=lambda kv: -kv[1])
        print("           split: " + ", ".join(f"{k} {v / 1e9:.2f} s" for k, v in steps), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--split", action="store_true", help="also print each ingest's time split")
    parser.add_argument("--peer-python", default=None, help="interpreter with HolisticTraceAnalysis installed")
    args = parser.parse_args()
    peer = f" {'HTA s':>7} {'speed-up':>8}" if args.peer_python else ""
    print(f"{'events':>10} {'size MB':>8} {'seconds':>8} {'MB/s':>7} {'events/s':>10} {'peak RSS MB':>11} "
          f"{'RSS/size':>8}{peer}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.events:
            t0 = time.perf_counter()
            r = run_one(n, Path(tmp))
            mb = r["bytes"] / 1e6
            line = (f"{n:>10,} {mb:>8.1f} {r['seconds']:>8.2f} {mb / r['seconds']:>7.1f} "
                    f"{n / r['seconds']:>10,.0f} {r['peak_rss_bytes'] / 1e6:>11.0f} "
                    f"{r['peak_rss_bytes'] / r['bytes']:>8.2f}")
            if args.peer_python:
                hta = run_peer(args.peer_python, Path(str(r["trace"])))
                line += f" {hta['seconds']:>7.2f} {hta['seconds'] / r['seconds']:>7.1f}x"
            print(line, flush=True)
            if args.split:
                print_split(Path(tmp) / f"data_{n}")
            del t0


if __name__ == "__main__":
    main()
