"""Breakdown, step and advisor benchmark: server-side time of the lane breakdown with its gap evidence (host
activity and causes of the largest gaps), of the step table and of the advisor's findings (the analyses it reads
already made), on synthetic Kineto runs (bench/synth.py).

Both are computed once per run and memoised by the server, so this is the cost of a run's first overview
or steps page; it prints numbers for docs/benchmarks.md and asserts nothing.

    .venv/bin/python bench/breakdown.py [--events 100000,1000000] [--repeat 3] [--annotation aten::linear]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from explorer.runs.run import Run

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from window import ensure_run  # noqa: E402

from explorer.store.runs import RunStore  # noqa: E402
from explorer.views.advice import compute_run_advice  # noqa: E402


def timed(fn: Callable[[], object], repeat: int) -> float:
    """Median ms of `repeat` calls of fn()."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", default="100000,1000000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--annotation", default="aten::linear",
                    help="the step name prefix (synthetic runs have no ProfilerStep#; each op is a step, up to 10,000)")
    ap.add_argument("--data-dir", type=Path, default=None, help="reuse runs from an earlier benchmark here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.data_dir or Path(tmp)
        print(f"{'events':>10} {'slices':>10} {'gaps':>8} {'breakdown ms':>13} {'steps':>6} {'steps ms':>9} "
              f"{'advice ms':>10}")
        for n in (int(v) for v in args.events.split(",")):
            run_id = ensure_run(data_dir, n)
            store = RunStore(data_dir)
            store.table(run_id, "slices")  # loaded once, as a server keeps it
            bd = Run.of(store, run_id).breakdown()
            steps = Run.of(store, run_id).steps(args.annotation)
            bd_ms = timed(partial(lambda st, r: Run.of(st, r).breakdown(), store, run_id), args.repeat)  # fresh: no memo
            st_ms = timed(partial(lambda st, r: Run.of(st, r).steps(args.annotation), store, run_id), args.repeat)
            run = Run.of(store, run_id)
            run.breakdown(), run.kernels(), run.steps()  # the advisor's inputs, memoised as a server has them
            adv_ms = timed(partial(compute_run_advice, run), args.repeat)
            print(f"{n:>10,} {store.get(run_id).summary.slices:>10,} {bd['gaps']['count']:>8,} {bd_ms:>13.1f} "
                  f"{steps['count']:>6} {st_ms:>9.1f} {adv_ms:>10.1f}")


if __name__ == "__main__":
    main()
