"""Ingest benchmark: synthetic Kineto traces of N events -> MB/s, events/s, peak RSS.

Each size runs in a fresh subprocess so peak RSS is that ingest's alone. With --peer hta and/or
--peer perfetto, the same files (the synthetic ones and the larger real traces of ../shared/traces) are
also loaded by HolisticTraceAnalysis and by the Perfetto UI in headless Chromium, alternating with the
explorer for --rounds rounds, and the median ratios are printed (bench/peers.py; bench/PEERS.md has the
peers' virtualenvs and the exact commands). Usage:
    .venv/bin/python bench/ingest.py [--events 100000 1000000] [--real] [--peer hta] [--peer perfetto] [--workdir DIR]
With --real, the real traces are also ingested on their own, --rounds fresh processes each, and their
throughput and peak RSS printed, the RSS split into the process before the ingest (and the shared libraries'
pages of it) and what the ingest added.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402
from synth import write_kineto_trace  # noqa: E402

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from explorer.native.memory import as_ingest_process, ingest_environment
ingest_environment()  # as the console script does for `ingest` (api/launch.py), before pyarrow loads
as_ingest_process()  # as `trace-explorer ingest` does (before the ingest's imports), and with its settings
from explorer.config import Settings
from explorer.ingest.limits import IngestLimits
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
def status_kib(field):  # a line of /proc/self/status (Linux), in KiB; 0 elsewhere
    try:
        with open("/proc/self/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith(field + ":")), 0)
    except OSError:
        return 0
def rss_by_mapping():  # /proc/self/smaps: the resident bytes of each mapped file, and of the anonymous memory
    sizes, name = {}, None
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split()
                if not head[0].endswith(":"):  # a mapping's first line: address perms offset dev inode [path]
                    name = " ".join(head[5:]).rsplit("/", 1)[-1] if len(head) > 5 else "[anonymous]"
                elif head[0] == "Rss:":
                    sizes[name] = sizes.get(name, 0) + int(head[1]) * 1024
    except OSError:
        pass
    return sorted(sizes.items(), key=lambda kv: -kv[1])
limits = IngestLimits.from_settings(Settings())  # (EXPLORER_NATIVE_READER=false: DuckDB's reader, as before)
store = RunStore(Path(sys.argv[2]))
store.index_files = Settings().index_files  # (EXPLORER_INDEX_FILES=ingest: the index built by the ingest, as the CLI's)
before = {"rss_before_bytes": status_kib("VmRSS") * 1024, "rss_file_before_bytes": status_kib("RssFile") * 1024,
          "rss_map_before": rss_by_mapping()}
t = time.perf_counter()
trace = Path(sys.argv[1])
rec = ingest_paths(store, [trace], "bench", max_bytes=trace.stat().st_size + 1,  # any size: the bench decides
                   limits=limits)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "slices": rec.summary.slices, "flows": rec.summary.flows,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, **before}))
"""


def ingest_child(trace: Path, data_dir: Path) -> dict[str, Any]:
    """The explorer's ingest of one file in a fresh interpreter (imports done before the clock starts)."""
    out = subprocess.run([sys.executable, "-c", CHILD, str(trace), str(data_dir)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the ingest of {trace.name} failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run_one(n_events: int, workdir: Path) -> dict[str, Any]:
    """Write the trace (or reuse it: a --workdir kept from an earlier run) and ingest it into a new data folder."""
    trace = workdir / f"synthetic_{n_events}.json"
    size = trace.stat().st_size if trace.exists() else write_kineto_trace(trace, n_events)
    shutil.rmtree(workdir / f"data_{n_events}", ignore_errors=True)
    result = ingest_child(trace, workdir / f"data_{n_events}")
    result.update({"events": n_events, "bytes": size, "trace": str(trace)})
    return result


@dataclass(frozen=True)
class RealRow:
    """One real trace's ingest: the median over its fresh processes of each figure (bytes, seconds)."""

    trace: str
    size_bytes: int
    seconds: float
    peak_rss_bytes: int  # the process's peak (ru_maxrss): what the "peak RSS <= 2x" reads
    rss_before_bytes: int  # the process once its imports are done, before the ingest reads a byte
    rss_file_before_bytes: int  # of which the pages of files it maps: the shared libraries' code and data
    rss_map_before: tuple[tuple[str, int], ...] = ()  # the first round's before, by mapping, largest first

    @property
    def share_bytes(self) -> int:
        """What the ingest itself added to the process's peak."""
        return self.peak_rss_bytes - self.rss_before_bytes


REAL_FIGURES = ("seconds", "peak_rss_bytes", "rss_before_bytes", "rss_file_before_bytes")


def real_rows(traces: Iterable[Path], workdir: Path, rounds: int,
              ingest: Callable[[Path, Path], dict[str, Any]] = ingest_child) -> Iterator[RealRow]:
    """Each trace ingested `rounds` times, each time by a fresh process into a fresh data folder."""
    for trace in traces:
        runs = []
        for r in range(rounds):
            data = workdir / f"data_{trace.stem}_{r}"
            try:
                runs.append(ingest(trace, data))
            finally:
                shutil.rmtree(data, ignore_errors=True)
        seconds, peak, before, files = (statistics.median(run[k] for run in runs) for k in REAL_FIGURES)
        by_mapping = tuple((str(name), int(size)) for name, size in runs[0].get("rss_map_before", ()))
        yield RealRow(trace.name, trace.stat().st_size, seconds, round(peak), round(before), round(files),
                      by_mapping)


def mapping_lines(row: RealRow, top: int = 12) -> list[str]:
    """Where the process's RSS before the ingest is: its largest mappings (the anonymous memory, the heap, each
    shared library's pages), then the rest together, in MiB."""
    head, rest = row.rss_map_before[:top], row.rss_map_before[top:]
    parts = [*head, *([(f"{len(rest)} others", sum(size for _, size in rest))] if rest else [])]
    return [f"  {size / 2**20:>6.1f} MiB  {name}" for name, size in parts]


def real_header() -> str:
    return (f"{'real trace':<40} {'MB':>6} {'seconds':>8} {'MB/s':>6} {'peak RSS':>9} {'x file':>6} "
            f"{'before':>7} {'(libs)':>7} {'ingest':>7} {'x file':>6}")


def real_line(row: RealRow) -> str:
    """A row of the real traces' table: RSS in MiB, each `x file` a multiple of the trace's bytes."""
    mib = 2**20
    return (f"{row.trace[:40]:<40} {row.size_bytes / 1e6:>6.1f} {row.seconds:>8.2f} "
            f"{row.size_bytes / 1e6 / row.seconds:>6.0f} {row.peak_rss_bytes / mib:>5.0f} MiB "
            f"{row.peak_rss_bytes / row.size_bytes:>5.2f}x {row.rss_before_bytes / mib:>3.0f} MiB "
            f"{row.rss_file_before_bytes / mib:>3.0f} MiB {row.share_bytes / mib:>3.0f} MiB "
            f"{row.share_bytes / row.size_bytes:>5.2f}x")


def explorer_loader(workdir: Path) -> peers.Loader:
    """The explorer's side of the side-by-side: a fresh interpreter and a fresh data folder per round (a
    reused folder would find the run already stored)."""

    def load(trace: Path, round_: int) -> float:
        data = workdir / f"data_{trace.stem}_{round_}"
        try:
            return float(ingest_child(trace, data)["seconds"])
        finally:
            shutil.rmtree(data, ignore_errors=True)

    return load


def process_loader(workdir: Path) -> peers.Loader:
    """The whole `trace-explorer ingest` process as a user runs it, timed from outside: interpreter start-up,
    imports, the ingest, writing the run and exiting; a fresh data folder per round."""
    script = Path(sys.executable).parent / "trace-explorer"
    command = [str(script)] if script.exists() else [sys.executable, "-c", "from api.launch import main; main()"]

    def load(trace: Path, round_: int) -> float:
        data = workdir / f"process_{trace.stem}_{round_}"
        t = time.perf_counter()
        try:
            out = subprocess.run([*command, "ingest", str(trace), "--data-dir", str(data)], capture_output=True,
                                 text=True)
            seconds = time.perf_counter() - t
            if out.returncode:
                raise SystemExit(f"trace-explorer ingest {trace.name} failed (exit {out.returncode}):\n"
                                 f"{out.stderr[-4000:]}")
            return seconds
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
    parser.add_argument("--events", type=int, nargs="*", default=[100_000, 1_000_000],
                        help="synthetic traces of these many events (none after the flag: none)")
    parser.add_argument("--real", action="store_true",
                        help="also ingest the real traces (--traces, default the larger Kineto traces of "
                             "../shared/traces) in --rounds fresh processes each: medians, with the RSS split")
    parser.add_argument("--split", action="store_true", help="also print each ingest's time split")
    parser.add_argument("--workdir", type=Path, help="keep the traces (and runs) here, reusing the traces already "
                        "written (a 20 GB trace takes minutes to write); default: a temporary folder")
    peers.add_arguments(parser)
    args = parser.parse_args()
    if args.events:
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
        if args.real:
            real = [peers.decompress(t, Path(tmp)) for t in
                    (peers.real_traces() if args.traces is None else args.traces)]
            print(f"\n{real_header()}  (medians of {args.rounds} fresh processes; before: the process once "
                  "its imports are done, (libs) the mapped files' pages of it; ingest: the peak less before)")
            rows = []
            for row in real_rows(real, Path(tmp), args.rounds):
                print(real_line(row), flush=True)
                rows.append(row)
            if rows:
                print(f"\nthe process before the ingest ({rows[0].trace}'s first round), by mapping:")
                print("\n".join(mapping_lines(rows[0])))
        if peers.chosen_peers(args):
            peers.side_by_side(args, synthetic, Path(tmp), explorer_loader(Path(tmp)), process_loader(Path(tmp)))


if __name__ == "__main__":
    main()
