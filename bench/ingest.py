"""Ingest benchmark: synthetic Kineto traces of N events -> MB/s, events/s, peak RSS.

Each size runs in a fresh subprocess so peak RSS is that ingest's alone. With --peer hta and/or
--peer perfetto, the same files (the synthetic ones and the larger real traces of ../shared/traces) are
also loaded by HolisticTraceAnalysis and by the Perfetto UI in headless Chromium, alternating with the
explorer for --rounds rounds, and the median ratios are printed (bench/peers.py; bench/PEERS.md has the
peers' virtualenvs and the exact commands). Usage:
    .venv/bin/python bench/ingest.py [--events 100000 1000000] [--peer hta] [--peer perfetto] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402
from synth import write_kineto_trace  # noqa: E402

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from explorer.ingest.memory import as_ingest_process, ingest_environment
ingest_environment()  # as the console script does for `ingest` (api/launch.py), before pyarrow loads
as_ingest_process()  # as `trace-explorer ingest` does (before the ingest's imports), and with its settings
from explorer.config import Settings
from explorer.ingest.limits import IngestLimits
from explorer.service import ingest_paths
from explorer.store.runs import RunStore
limits = IngestLimits.from_settings(Settings())  # (EXPLORER_NATIVE_READER=false: DuckDB's reader, as before)
store = RunStore(Path(sys.argv[2]))
store.index_files = Settings().index_files  # (EXPLORER_INDEX_FILES=ingest: the index built by the ingest, as the CLI's)
t = time.perf_counter()
trace = Path(sys.argv[1])
rec = ingest_paths(store, [trace], "bench", max_bytes=trace.stat().st_size + 1,  # any size: the bench decides
                   limits=limits)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "slices": rec.summary.slices, "flows": rec.summary.flows,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def ingest_child(trace: Path, data_dir: Path) -> dict[str, float]:
    """The explorer's ingest of one file in a fresh interpreter (imports done before the clock starts)."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(trace), str(data_dir)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the ingest of {trace.name} failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run_one(n_events: int, workdir: Path) -> dict[str, float]:
    """Write the trace (or reuse it: a --workdir kept from an earlier run) and ingest it into a new data folder."""
    trace = workdir / f"synthetic_{n_events}.json"
    size = trace.stat().st_size if trace.exists() else write_kineto_trace(trace, n_events)
    shutil.rmtree(workdir / f"data_{n_events}", ignore_errors=True)
    result = ingest_child(trace, workdir / f"data_{n_events}")
    result.update({"events": n_events, "bytes": size, "trace": str(trace)})
    return result


def explorer_loader(workdir: Path) -> peers.Loader:
    """The explorer's side of the side-by-side: a fresh interpreter and a fresh data folder per round (a
    reused folder would find the run already stored)."""

    def load(trace: Path, round_: int) -> float:
        data = workdir / f"data_{trace.stem}_{round_}"
        try:
            return ingest_child(trace, data)["seconds"]
        finally:
            shutil.rmtree(data, ignore_errors=True)

    return load


def print_split(data_dir: Path) -> None:
    """The ingest's own time split (explorer.model.split, in each run's meta), slowest step first, with the
    cores each step kept busy (its CPU time over its wall time)."""
    for run_json in sorted(data_dir.glob("runs/*/run.json")):
        meta = json.loads(run_json.read_text())["meta"]
        split: dict[str, int] = meta.get("ingest_split_ns", {})
        cpu: dict[str, int] = meta.get("ingest_cpu_ns", {})
        steps = sorted(split.items(), key=lambda kv: -kv[1])
        print("           split: " + ", ".join(f"{k} {v / 1e9:.2f} s" + (f" ({cpu[k] / v:.1f} cores)" if cpu.get(k)
                                                and v else "") for k, v in steps), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--split", action="store_true", help="also print each ingest's time split")
    parser.add_argument("--workdir", type=Path, help="keep the traces (and runs) here, reusing the traces already "
                        "written (a 20 GB trace takes minutes to write); default: a temporary folder")
    peers.add_arguments(parser)
    args = parser.parse_args()
    print(f"{'events':>10} {'size MB':>8} {'seconds':>8} {'MB/s':>7} {'events/s':>10} {'peak RSS MB':>11} "
          f"{'RSS/size':>8}")
    with nullcontext(str(args.workdir)) if args.workdir else tempfile.TemporaryDirectory() as tmp:
        Path(tmp).mkdir(parents=True, exist_ok=True)
        synthetic = []
        for n in args.events:
            r = run_one(n, Path(tmp))
            mb = r["bytes"] / 1e6
            print(f"{n:>10,} {mb:>8.1f} {r['seconds']:>8.2f} {mb / r['seconds']:>7.1f} "
                  f"{n / r['seconds']:>10,.0f} {r['peak_rss_bytes'] / 1e6:>11.0f} "
                  f"{r['peak_rss_bytes'] / r['bytes']:>8.2f}", flush=True)
            if args.split:
                print_split(Path(tmp) / f"data_{n}")
            synthetic.append(Path(str(r["trace"])))
        if peers.chosen_peers(args):
            peers.side_by_side(args, synthetic, Path(tmp), explorer_loader(Path(tmp)))


if __name__ == "__main__":
    main()
