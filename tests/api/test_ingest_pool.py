"""Ingest jobs run in a pool: a small upload sent after a big one is ready while the big one still ingests."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from tests.api.conftest import TINY, wait_until_done

EVENTS = 1_000_000


def test_a_small_upload_does_not_wait_for_a_big_one(client: TestClient) -> None:
    big = ('{"traceEvents": [' + ",".join(
        f'{{"ph":"X","cat":"cpu_op","name":"op{i % 50}","pid":1,"tid":{i % 4},"ts":{i * 3},"dur":2}}'
        for i in range(EVENTS)) + "]}").encode()
    slow = client.post("/api/runs", files={"files": ("big.json", big)}).json()["id"]
    deadline = time.monotonic() + 60
    while client.get(f"/api/runs/{slow}").json()["status"] == "queued":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    fast = client.post("/api/runs", files={"files": (TINY.name, TINY.read_bytes())}).json()["id"]
    assert wait_until_done(client, fast)["status"] == "ready"
    assert client.get(f"/api/runs/{slow}").json()["status"] == "ingesting"  # still at it
    assert wait_until_done(client, slow, timeout_s=120)["status"] == "ready"
