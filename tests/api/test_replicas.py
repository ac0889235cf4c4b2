"""Stateless replicas: two servers on one catalog and one S3 storage, each with its own empty data folder.
The one that never saw the upload serves the run (its tables fetched from storage) exactly as the one that
ingested it; a run deleted on one is gone on the other, its objects too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.store.catalog.db import sqlite_url
from tests.api.conftest import TINY, wait_until_done
from tests.helpers.s3_server import CREDENTIALS, REGION, new_bucket

PAGES = ["", "/tracks", "/ops", "/ops?sort=-self_cpu_ns&view=all", "/breakdown", "/steps", "/kernels",
         "/timeline?width_px=800", "/sql?q=select%20count(*)%20as%20n,%20sum(dur_ns)%20as%20t%20from%20slices"]


def without_timing(body: Any) -> Any:
    """The body less the SQL result's elapsed_ms (how long this replica took, not what it answered)."""
    return {k: v for k, v in body.items() if k != "elapsed_ms"} if isinstance(body, dict) else body


def test_a_replica_serves_what_another_ingested(tmp_path: Path, s3_endpoint: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", CREDENTIALS["key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CREDENTIALS["secret"])
    bucket = new_bucket(s3_endpoint)
    shared = {"catalog_url": sqlite_url(tmp_path / "catalog.sqlite"), "storage": f"s3://{bucket}/team",
              "s3_endpoint_url": s3_endpoint, "s3_region": REGION}
    a = TestClient(create_app(Settings(data_dir=tmp_path / "a", **shared)))
    b = TestClient(create_app(Settings(data_dir=tmp_path / "b", **shared)))
    with a, b:
        r = a.post("/api/runs", files=[("files", (TINY.name, TINY.read_bytes()))], data={"name": "tiny"})
        assert r.status_code in (200, 202), r.text
        run = wait_until_done(a, r.json()["id"])
        assert run["status"] == "ready", run
        for page in PAGES:
            url = f"/api/runs/{run['id']}{page}"
            got_a, got_b = a.get(url), b.get(url)
            assert got_a.status_code == 200, (url, got_a.text)
            assert without_timing(got_b.json()) == without_timing(got_a.json()), url
        fleet = "/api/fleet/ops?kind=kernel"
        assert b.get(fleet).json() == a.get(fleet).json()

        assert a.delete(f"/api/runs/{run['id']}").status_code in (200, 204)
        assert b.get(f"/api/runs/{run['id']}/ops").status_code == 404
        assert a.app.state.explorer.store.storage.list("runs") == []  # type: ignore[attr-defined]
