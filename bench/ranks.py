"""Multi-rank benchmark: N synthetic ranks (bench/synth_ranks.py: distributedInfo, steps, NCCL all-reduces,
one rank late) of about E events each, ingested as one run -> seconds and peak RSS; then the per-rank
summary (`/api/runs/{id}/ranks`, cold and memoised), the ranks page, a rank-filtered op table and the
collectives table (`/api/runs/{id}/collectives`, when that route is there) served by the real app.

Ingest and serving each run in a fresh subprocess, so each peak RSS is that step's alone. Usage:
    .venv/bin/python bench/ranks.py [--ranks 64] [--events 50000]
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
from synth_ranks import RankPlan, write_rank_traces  # noqa: E402

EVENTS_PER_UNIT = 3  # cpu op, cudaLaunchKernel, kernel
STEPS = 10

INGEST = r"""
import json, resource, sys, time
from pathlib import Path
from explorer.native.memory import as_ingest_process, ingest_environment
ingest_environment()  # as the console script does for `ingest` (api/launch.py), before pyarrow loads
as_ingest_process()  # as `trace-explorer ingest` does, before the ingest's imports
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
paths = sorted(Path(sys.argv[1]).glob("rank-*.pt.trace.json"))
t = time.perf_counter()
rec = ingest_paths(RunStore(Path(sys.argv[2])), paths, "ranks bench")
print(json.dumps({"seconds": time.perf_counter() - t, "run": rec.id, "slices": rec.summary.slices,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

SERVE = r"""
import json, os, resource, sys, time
os.environ.setdefault("EXPLORER_ALLOWED_HOSTS", '["testserver"]')
from pathlib import Path
from fastapi.testclient import TestClient
from api.app import create_app
from explorer.config import Settings
run = sys.argv[2]
out = {}
with TestClient(create_app(Settings(data_dir=Path(sys.argv[1])))) as c:
    for key, path in (("ranks_cold", f"/api/runs/{run}/ranks"), ("ranks_warm", f"/api/runs/{run}/ranks"),
                      ("ranks_page", f"/runs/{run}/ranks"), ("ops_rank_0", f"/api/runs/{run}/ops?rank=0"),
                      ("rank_compare", f"/api/runs/{run}/ranks/compare"),
                      ("collectives", f"/api/runs/{run}/collectives?limit=50")):
        t = time.perf_counter()
        r = c.get(path)
        out[key] = {"seconds": time.perf_counter() - t, "status": r.status_code}
    out["stragglers"] = c.get(f"/api/runs/{run}/ranks").json()["stragglers"]
out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(out))
"""


def child(script: str, *args: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", script, *args], check=True, capture_output=True, text=True)
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--events", type=int, default=50_000, help="events per rank (about)")
    args = parser.parse_args()
    units = max(1, args.events // (STEPS * EVENTS_PER_UNIT))
    # the late rank arrives 10 % of a step late: past the rule's 5 %
    plan = RankPlan(world=args.ranks, steps=STEPS, units=units, late_rank=args.ranks // 2, late_ns=units * 40_000)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        paths = write_rank_traces(Path(tmp) / "traces", plan)
        size = sum(p.stat().st_size for p in paths)
        print(f"wrote {args.ranks} ranks x ~{STEPS * units * EVENTS_PER_UNIT:,} events ({size / 1e6:.0f} MB) "
              f"in {time.perf_counter() - t:.1f} s", flush=True)
        ing = child(INGEST, str(Path(tmp) / "traces"), str(Path(tmp) / "data"))
        print(f"ingest: {ing['slices']:,} slices in {ing['seconds']:.1f} s, "
              f"peak RSS {int(str(ing['peak_rss_bytes'])) / 1e6:.0f} MB", flush=True)
        served = child(SERVE, str(Path(tmp) / "data"), str(ing["run"]))
        for key, value in served.items():
            if isinstance(value, dict):
                print(f"  {key:<14} {value['seconds'] * 1000:>9.0f} ms  (HTTP {value['status']})")
        print(f"  stragglers: {served['stragglers']} (rank {plan.late_rank} is late by construction); "
              f"serving peak RSS {int(str(served['peak_rss_bytes'])) / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
