"""Collectives benchmark: many synthetic ranks (tests/analysis/collectives/synthetic.py's NCCL all-reduces, rank 2 late,
plus filler host ops to reach the event count) ingested as one run, then the server-side time of matching
its collectives (the first /collectives request of a run; memoised after) and of the API answers.
Prints numbers for docs/benchmarks.md; asserts nothing.

    .venv/bin/python bench/collectives.py [--ranks 64] [--events 50000] [--collectives 400]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from explorer.runs.run import Run

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fastapi.testclient import TestClient  # noqa: E402

from api.app import create_app  # noqa: E402
from explorer.config import Settings  # noqa: E402
from explorer.runs.ingest import ingest_paths  # noqa: E402
from tests.analysis.collectives.synthetic import BASE_NS, rank_events, straggler_calls  # noqa: E402

EVENTS_PER_COLLECTIVE = 5  # record_param_comms, launch, flow start, kernel, flow end


def write_rank(path: Path, rank: int, ranks: int, events: int, collectives: int) -> None:
    ev = rank_events(rank, straggler_calls(rank, collectives, world=ranks), group_size=ranks)
    for i in range(max(0, events - len(ev))):  # host ops between the collectives, 2 µs apart
        ev.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 50}", "pid": 100 + rank, "tid": 2,
                   "ts": f"{2 * i}.000", "dur": 1, "args": {}})
    path.write_text(json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS,
                                "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": ranks},
                                "traceEvents": ev}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--events", type=int, default=50_000, help="events per rank")
    ap.add_argument("--collectives", type=int, default=400, help="all-reduces per rank")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        files = [d / f"rank-{r}.json" for r in range(a.ranks)]
        for r, f in enumerate(files):
            write_rank(f, r, a.ranks, a.events, a.collectives)
        mb = sum(f.stat().st_size for f in files) / 1e6
        app = create_app(Settings(data_dir=d / "data"))
        store = app.state.explorer.store
        t0 = time.perf_counter()
        rec = ingest_paths(store, files, "bench collectives")
        ingest_s = time.perf_counter() - t0
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t0 = time.perf_counter()
        colls = Run.of(store, rec.id).collectives()  # what the server's first request does, before memoising
        match_ms = (time.perf_counter() - t0) * 1000
        with TestClient(app, base_url="http://127.0.0.1") as client:
            timings = {}
            for name, url in (("collectives (first: matching)", f"/api/runs/{rec.id}/collectives?limit=100"),
                              ("collectives (memoised)", f"/api/runs/{rec.id}/collectives?limit=100"),
                              ("collectives page", f"/runs/{rec.id}/collectives?limit=100"),
                              ("links, 1/10 of the run", f"/api/runs/{rec.id}/collectives/links?start_ns=0"
                               f"&end_ns={rec.summary.span_ns // 10}")):
                t0 = time.perf_counter()
                r = client.get(url)
                timings[name] = ((time.perf_counter() - t0) * 1000, r.status_code, len(r.content))
        print(f"{a.ranks} ranks x {a.events:,} events ({a.ranks * a.events:,} events, {mb:.0f} MB JSON), "
              f"{a.collectives} all-reduces per rank")
        print(f"ingest: {ingest_s:.1f} s ({mb / ingest_s:.0f} MB/s), peak RSS of this process {peak_mb:.0f} MB")
        print(f"matching {len(colls.rows):,} collectives ({len(colls.mismatches)} mismatches): {match_ms:.0f} ms")
        for name, (ms, status, size) in timings.items():
            print(f"  {name:32s} {ms:7.1f} ms  HTTP {status}  {size / 1000:.0f} kB")


if __name__ == "__main__":
    main()
