"""SQL cannot starve the server: results stop at a byte cap (`truncated`), at most
MAX_CONCURRENT_QUERIES run at once with their share of the memory, and a query finding no free slot
within its time limit is a clear 503, not a pile-up."""

from __future__ import annotations

import threading
import time

from fastapi.testclient import TestClient

from explorer.config import Settings
from explorer.store.sql import MAX_CONCURRENT_QUERIES, MAX_RESULT_BYTES, TOTAL_MEMORY_MB, free_slots
from tests.api.conftest import assert_error

SLOW = "select sum(a.range * b.range) from range(100000000) a, range(100000000) b"  # never ends by itself


def sql(client: TestClient, run_id: str, q: str) -> object:
    return client.post(f"/api/runs/{run_id}/sql", json={"sql": q})


def test_a_huge_result_is_cut_at_the_byte_cap(client: TestClient, run_id: str) -> None:
    r = sql(client, run_id, "select repeat('x', 1000000) as big from range(300)")
    body = r.json()
    assert r.status_code == 200 and body["truncated"] is True
    assert 0 < len(body["rows"]) <= MAX_RESULT_BYTES // 1_000_000 + 1
    assert len(r.content) < MAX_RESULT_BYTES + 2_000_000


def test_each_query_gets_its_share_of_the_memory(client: TestClient, run_id: str) -> None:
    limit = sql(client, run_id, "select current_setting('memory_limit')").json()["rows"][0][0]
    assert limit.endswith(("MiB", "GiB", "MB", "GB"))
    mib = float(limit.split()[0]) * (1024 if "G" in limit else 1)
    assert mib <= TOTAL_MEMORY_MB / MAX_CONCURRENT_QUERIES * 1.05


def test_queries_beyond_the_slots_wait_then_are_refused(settings: Settings, client: TestClient, run_id: str) -> None:
    settings.sql_timeout_s = 6.0
    results: list[int] = []
    runners = [threading.Thread(target=lambda: results.append(sql(client, run_id, SLOW).status_code))
               for _ in range(MAX_CONCURRENT_QUERIES)]
    for t in runners:
        t.start()
    deadline = time.monotonic() + 4.0  # both slots taken by queries that run to the time limit (a loaded box
    while free_slots() and time.monotonic() < deadline:  # may take a while to start them: wait for it)
        time.sleep(0.02)
    assert free_slots() == 0, "the slow queries did not start"
    settings.sql_timeout_s = 0.5
    started = time.monotonic()
    busy = sql(client, run_id, "select 1")
    waited = time.monotonic() - started
    assert_error(busy, 503, "busy")
    assert 0.4 < waited < 4.0
    for t in runners:
        t.join(timeout=30)
    assert results == [400] * MAX_CONCURRENT_QUERIES  # stopped at their time limit, with a message
    settings.sql_timeout_s = 5.0
    assert sql(client, run_id, "select 1").json()["rows"] == [[1]]  # the slots are free again


def test_settings_show_no_server_paths(client: TestClient, run_id: str) -> None:
    """duckdb_settings() showed the server user's home (secret_directory) and working folder (temp_directory)."""
    import os
    from pathlib import Path

    rows = sql(client, run_id, "select name, value from duckdb_settings()").json()["rows"]  # type: ignore[attr-defined]
    shown = {name: value for name, value in rows}
    for private in {str(Path.home()), os.getcwd()} - {"/"}:
        assert not [n for n, v in shown.items() if private in str(v)], private
    assert shown["enable_external_access"] == "false" and shown["lock_configuration"] == "true"
