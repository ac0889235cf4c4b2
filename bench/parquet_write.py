"""The slices table's Parquet write: the store's options (a dictionary only for repeating columns,
explorer.store.parquet) against Parquet's default (a dictionary tried on every column), alternating, the
median of --rounds writes each. Each trace is ingested first (synthetic: bench/synth.py; or files given).
    .venv/bin/python bench/parquet_write.py [--events 1000000] [--traces a.json b.json] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth import write_kineto_trace  # noqa: E402

from explorer.runs.ingest import ingest_paths  # noqa: E402
from explorer.store.parquet import PARQUET_OPTIONS, parquet_options  # noqa: E402
from explorer.store.runs import RunStore  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, nargs="*", default=[1_000_000])
    parser.add_argument("--traces", type=Path, nargs="*", default=[])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="parquet-write-") as tmp:
        work = Path(tmp)
        traces = list(args.traces)
        for n in args.events:
            traces.append(work / f"synthetic_{n}.json")
            write_kineto_trace(traces[-1], n)
        store = RunStore(work / "data")
        print(f"{'trace':<32} {'slices':>9} {'default s':>10} {'MB':>7} {'store s':>8} {'MB':>7}")
        for trace in traces:
            rec = ingest_paths(store, [trace], trace.name)
            table = pq.read_table(store.table_path(rec.id, "slices"))
            sides = {"default": PARQUET_OPTIONS, "store": parquet_options(table.schema)}
            seconds: dict[str, list[float]] = {side: [] for side in sides}
            sizes: dict[str, int] = {}
            for _ in range(args.rounds):
                for side, options in sides.items():
                    out = work / f"{side}.parquet"
                    started = time.perf_counter()
                    pq.write_table(table, out, **options)
                    seconds[side].append(time.perf_counter() - started)
                    sizes[side] = os.path.getsize(out)
            print(f"{trace.name[:32]:<32} {table.num_rows:>9,} "
                  + " ".join(f"{statistics.median(seconds[s]):>10.3f} {sizes[s] / 1e6:>7.1f}" for s in sides))


if __name__ == "__main__":
    main()
