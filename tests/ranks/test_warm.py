"""A multi-rank run's per-rank summary and collectives are built when its ingest finishes, so the ranks page
and the collectives table answer from memory on their first view (seconds otherwise on a 64-rank run)."""

from __future__ import annotations

import time
from pathlib import Path

from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from tests.api.conftest import wait_until_done


def test_ranks_and_collectives_are_ready_before_the_first_view(tmp_path: Path, straggler_traces: list[Path]) -> None:
    with TestClient(create_app(Settings(data_dir=tmp_path / "data"))) as client:
        files = [("files", (p.name, p.read_bytes())) for p in straggler_traces]
        run_id = client.post("/api/runs", files=files).json()["id"]
        assert wait_until_done(client, run_id)["status"] == "ready"
        state = client.app.state.explorer  # type: ignore[attr-defined]
        deadline = time.monotonic() + 60
        while not (state.runs.memo.holds(run_id, "ranks") and state.runs.memo.holds(run_id, "collectives")):
            assert time.monotonic() < deadline, "the ranks and collectives were not built after the ingest"
            time.sleep(0.05)
        assert client.get(f"/api/runs/{run_id}/ranks").json()["ranks"]  # served from memory
        assert [r["last_arriver"] for r in client.get(f"/api/runs/{run_id}/collectives").json()["rows"]] == [2, 2, 2]
