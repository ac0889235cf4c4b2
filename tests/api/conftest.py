"""API test fixtures: a real app over a fresh data folder, and helpers to upload and wait for ingest."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings

HERE = Path(__file__).resolve().parent
TINY = HERE / "fixtures" / "tiny_kineto.json"

Uploader = Callable[..., dict[str, Any]]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data")


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c


def wait_until_done(client: TestClient, run_id: str, timeout_s: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
        if run["status"] in ("ready", "failed") or time.monotonic() > deadline:
            return run
        time.sleep(0.05)


@pytest.fixture
def upload(client: TestClient) -> Uploader:
    """upload(files=[(name, bytes)], name=..., tags=..., wait=True) -> final run JSON (or the 202 body)."""

    def _upload(files: list[tuple[str, bytes]] | None = None, wait: bool = True, **form: str) -> dict[str, Any]:
        files = files if files is not None else [(TINY.name, TINY.read_bytes())]
        r = client.post("/api/runs", files=[("files", f) for f in files], data=form)
        assert r.status_code in (200, 202), r.text
        body: dict[str, Any] = r.json()
        return wait_until_done(client, body["id"]) if wait else body

    return _upload


@pytest.fixture
def run_id(upload: Uploader) -> str:
    run = upload()
    assert run["status"] == "ready", run
    return str(run["id"])


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """Pin the one error shape: {"error": {"code", "message", "detail"}}."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "detail"}
    assert body["error"]["code"] == code
    assert "Traceback" not in response.text
    return body
