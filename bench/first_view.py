"""The first timeline view of a stored run, as a server makes it: its tables read into memory, its timeline index
mapped from the run's folder where it is stored there (its ingest, EXPLORER_INDEX_FILES=ingest, or an earlier first
build wrote it), else built (explorer.analysis.timeline.index) — into the run's folder (--index-files first_build, the
default) or in memory (off) —, the heap trimmed, then one window of the whole run at 2,000 px. Prints the seconds
of each, how the index came ("mapped", "written", "built"), the memory the tables and the index hold after, and
the process's peak RSS. Run it as a server runs (Arrow's system pool, as `serve` sets it) in a fresh process;
asserts nothing. Usage:
    ARROW_DEFAULT_MEMORY_POOL=system .venv/bin/python bench/first_view.py --data-dir DIR [--run RUN_ID] \
        [--index-files first_build|off]
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import numpy as np

from explorer.analysis.timeline.index import compute_window
from explorer.native.heap import trim_heap
from explorer.runs.run import timeline_index
from explorer.store.index_files import INDEX_DIR
from explorer.store.runs import RunStore

TABLES = ("slices", "tracks", "counters", "flows", "instants")


def rss_mib() -> float:
    return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, required=True, help="a data folder holding the run")
    parser.add_argument("--run", help="the run's id (default: the most recent ready run)")
    parser.add_argument("--index-files", choices=("first_build", "off"), default="first_build",
                        help="the index of a run stored without one: written into its folder, or built in memory")
    args = parser.parse_args()
    store = RunStore(args.data_dir)
    store.index_files = args.index_files
    run_id = args.run or store.catalog.list(status="ready", limit=1)[0][0].id
    rec = store.get(run_id)
    had_files = (store.run_dir(run_id) / INDEX_DIR).exists()
    before = rss_mib()
    started = time.perf_counter()
    tables = {name: store.table(run_id, name) for name in TABLES}
    read = time.perf_counter()
    tables_mib = rss_mib() - before
    index = timeline_index(store, run_id, rec.summary.start_ns)  # (as AppState.timeline_index)
    built = time.perf_counter()
    trim_heap()
    window = compute_window(index, 0, rec.summary.end_ns - rec.summary.start_ns, 2000)
    done = time.perf_counter()
    print(json.dumps({
        "run": run_id, "slices": tables["slices"].num_rows, "read_s": round(read - started, 2),
        "index": "built" if not isinstance(index.ts, np.memmap) else "mapped" if had_files else "written", "index_s": round(built - read, 2), "window_s": round(done - built, 3),
        "window_tracks": len(window.get("tracks", [])), "before_mib": round(before),
        "tables_mib": round(tables_mib), "held_after_mib": round(rss_mib() - before),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }))


if __name__ == "__main__":
    main()
