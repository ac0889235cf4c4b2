"""Where an ingest's memory goes (issue 15's peak RSS target): one synthetic Kineto trace (bench/synth.py)
ingested in this process while a thread samples the RSS every 10 ms; each step of the ingest's time split
(explorer/model/split.py: parse, feed, columns, links, nesting, sort, tracks, op_table) and the store's write
are bracketed, and the table printed is the RSS when each step started, the highest RSS seen during it, and
the RSS when it ended. The step whose peak is the run's peak is what bounds the memory.
Usage:
    .venv/bin/python bench/ingest_memory.py [--events 1000000 | --trace FILE] [--memory-mb 1500]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from synth import write_kineto_trace  # noqa: E402

PAGE = 4096


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def children_rss_bytes() -> int:
    """The RSS of this process's children together (the check of explorer/ingest/chrome/json_check.py runs in one)."""
    me, total = os.getpid(), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) != me:
                    continue
            with open(f"/proc/{entry}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            continue
    return total


class Sampler:
    """The RSS every 10 ms; `peak_since(mark)` is the highest sample after a mark."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, int]] = []
        self.children_peak = 0  # the children's RSS together, at its highest
        self.together_peak = 0  # this process's and its children's, sampled at the same moment
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            own, children = rss_bytes(), children_rss_bytes()
            self.samples.append((time.perf_counter(), own))
            self.children_peak = max(self.children_peak, children)
            self.together_peak = max(self.together_peak, own + children)

    def peak_between(self, t0: float, t1: float) -> int:
        return max([r for t, r in self.samples if t0 <= t <= t1] or [rss_bytes()])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--memory-mb", type=int, default=1500)
    ap.add_argument("--trace", type=Path, default=None,
                    help="ingest this trace file instead of writing one (e.g. a 10M-event file kept from bench/ingest.py)")
    args = ap.parse_args()

    from explorer.native.memory import as_ingest_process, ingest_environment

    ingest_environment()  # as the console script does for `ingest` (api/launch.py), before pyarrow loads
    as_ingest_process()  # as `trace-explorer ingest` does, before the ingest's imports
    from explorer.ingest.limits import IngestLimits
    from explorer.model import split as split_module
    from explorer.runs.ingest import ingest_paths
    from explorer.store import runs as runs_module
    from explorer.store.runs import RunStore

    with tempfile.TemporaryDirectory() as tmp:
        trace = args.trace or Path(tmp) / "trace.json"
        if args.trace is None:
            write_kineto_trace(trace, args.events)
        size = trace.stat().st_size
        sampler = Sampler()
        rows: list[tuple[str, int, int, int]] = []
        original_step = split_module.TimeSplit.step

        @contextmanager
        def step(self: split_module.TimeSplit, name: str) -> Iterator[None]:
            t0, r0 = time.perf_counter(), rss_bytes()
            with original_step(self, name):
                yield
            t1 = time.perf_counter()
            rows.append((name, r0, sampler.peak_between(t0, t1), rss_bytes()))

        split_module.TimeSplit.step = step  # type: ignore[method-assign]
        original_save = runs_module.RunStore.save

        def save(self: RunStore, *a: object, **k: object) -> object:
            t0, r0 = time.perf_counter(), rss_bytes()
            out = original_save(self, *a, **k)  # type: ignore[arg-type]
            rows.append(("write (store.save)", r0, sampler.peak_between(t0, time.perf_counter()), rss_bytes()))
            return out

        runs_module.RunStore.save = save  # type: ignore[method-assign,assignment]
        store = RunStore(Path(tmp) / "data")
        start_rss = rss_bytes()
        started = time.perf_counter()
        ingest_paths(store, [trace], limits=IngestLimits(memory_mb=args.memory_mb))
        wall = time.perf_counter() - started
        sampler.stop()
        peak = max(r for _, r in sampler.samples)
        mb = 2**20
        events = f"{args.trace.name}:" if args.trace else f"{args.events:,} events,"
        print(f"{events} {size / 1e6:,.1f} MB file, memory setting {args.memory_mb} MB; "
              f"{wall:.1f} s; RSS before the ingest {start_rss / mb:,.0f} MiB, peak {peak / mb:,.0f} MiB "
              f"({peak / size:.2f}x the file)")
        print(f"the check's process beside it (explorer/ingest/chrome/json_check.py): peak {sampler.children_peak / mb:,.0f} MiB; "
              f"the two together at most {sampler.together_peak / mb:,.0f} MiB ({sampler.together_peak / size:.2f}x)")
        print(f"{'step':<20} {'RSS at start':>13} {'peak during':>12} {'RSS at end':>11}  (MiB)")
        for name, r0, rp, r1 in rows:
            mark = "  <- the peak" if rp == peak else ""
            print(f"{name:<20} {r0 / mb:>13,.0f} {rp / mb:>12,.0f} {r1 / mb:>11,.0f}{mark}")
        store.catalog.close()


if __name__ == "__main__":
    main()
