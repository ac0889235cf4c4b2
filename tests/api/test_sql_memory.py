"""SQL that builds huge values cannot grow the server: queries run in worker processes whose address space the OS
bounds (explorer.store.sql_worker). Measured on a real `serve` (a subprocess): the issue's queries, and a fuzz of
string, list and blob builders, each answer within the time limit plus the kill's grace, the server's own peak RSS
stays within SERVER_GROWTH_MB of what it was, and every worker within WORKER_HEADROOM_MB of its warm size."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import httpx
import pytest

from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
from explorer.store.sql_worker import KILL_GRACE_S, WORKER_HEADROOM_MB
from tests.api.conftest import TINY
from tests.helpers.support import serve_subprocess

TIMEOUT_S = 3.0
SERVER_GROWTH_MB = 150  # the server's own peak may grow this much over the queries (answers, buffers): not GBs
WORKER_BASE_MB = 600  # a warm worker's RSS (Python, pyarrow, DuckDB) stays under this; a query adds the headroom
BUILDERS = [
    "select length(repeat('x', 4000000000))",  # the issue's: 4-12 GB in the server before
    "select length(repeat('x', 1500000000) || repeat('y', 1500000000))",
    "select length(repeat('x', 1000000000))",  # fits the headroom, outlives the time limit: killed
    "select length(lpad('x', 4000000000, 'y'))",
    "select length(rpad('x', 4000000000, 'y'))",
    "select octet_length(repeat('x'::blob, 4000000000))",
    "select len(range(4000000000))",
    "select len(list_resize([1], 4000000000))",
    "select length(string_agg(repeat('x', 100000), '')) from range(100000)",
    "select length(printf('%4000000000d', 1))",
    "select length(bar(1, 0, 1, 4000000000))",
]


def rss_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def children(pid: int) -> list[int]:
    """The process's children, whichever of its threads started them."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


@pytest.mark.slow
def test_huge_value_builders_are_bounded_and_the_server_does_not_grow(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = RunStore(data)
    run_id = ingest_paths(store, [TINY]).id
    store.catalog.close()
    with serve_subprocess(data, env={"EXPLORER_SQL_TIMEOUT_S": str(TIMEOUT_S)}) as (base, proc):
        url = f"{base}/api/runs/{run_id}/sql"
        assert httpx.post(url, json={"sql": "select 1"}, timeout=60).json()["rows"] == [[1]]  # a warm worker
        server_before = rss_mb(proc.pid, "VmHWM")
        worker_peak: dict[int, float] = {}
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.05):
                for child in children(proc.pid):
                    with contextlib.suppress(OSError):
                        worker_peak[child] = max(worker_peak.get(child, 0.0), rss_mb(child, "VmRSS"))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        answers = []
        try:
            for sql in BUILDERS:
                started = time.monotonic()
                r = httpx.post(url, json={"sql": sql}, timeout=120)
                answers.append((sql, r.status_code, time.monotonic() - started, r.json()))
        finally:
            stop.set()
            sampler.join()
        server_after = rss_mb(proc.pid, "VmHWM")
        ok = httpx.post(url, json={"sql": "select count(*) from slices"}, timeout=60)
    for sql, status, took, body in answers:
        # 400 (out of memory, or the time limit), or 200 where DuckDB bounds it itself; a new worker's start
        # (spawned after a kill, ~1-3 s on a loaded machine) is the rest of the allowance
        assert status in (200, 400), (sql, body)
        assert took < TIMEOUT_S + KILL_GRACE_S + 10, (sql, took)
    assert any("time limit" in str(b) for _, _, _, b in answers)
    assert any("memory" in str(b).lower() for _, _, _, b in answers)
    assert server_after - server_before < SERVER_GROWTH_MB, (server_before, server_after)
    assert worker_peak and max(worker_peak.values()) < WORKER_BASE_MB + WORKER_HEADROOM_MB, worker_peak
    assert ok.status_code == 200 and ok.json()["rows"][0][0] > 0
    print(f"server peak RSS {server_before:.0f} -> {server_after:.0f} MB; worker peaks (MB): "
          + ", ".join(f"{v:.0f}" for v in worker_peak.values()))
    for sql, status, took, body in answers:
        print(f"{status} {took:5.1f} s  {sql}  {str(body)[:90]}")
