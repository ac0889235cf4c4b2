"""Token access: bearer header, cookie, ?token= (sets the cookie); health and static stay open."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from tests.api.conftest import assert_error

TOKEN = "tok-123"


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(data_dir=tmp_path / "data", token=TOKEN))) as c:
        yield c


def test_requests_without_token_get_401(locked: TestClient) -> None:
    for path in ("/api/runs", "/-/version", "/docs", "/runs/x"):
        body = assert_error(locked.get(path), 401, "unauthorized")
        assert "token" in body["error"]["message"]
    assert_error(locked.get("/api/runs", headers={"Authorization": "Bearer wrong"}), 401, "unauthorized")
    assert_error(locked.post("/api/runs", files={"files": ("a.json", b"{}")}), 401, "unauthorized")


def test_health_and_static_are_open(locked: TestClient) -> None:
    assert locked.get("/-/health").status_code == 200
    assert locked.get("/static/vendor/plotly.min.js").status_code == 200


def test_bearer_cookie_and_query_token(locked: TestClient) -> None:
    assert locked.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    r = locked.get(f"/api/runs?token={TOKEN}")
    assert r.status_code == 200 and f"explorer_token={TOKEN}" in r.headers["set-cookie"]
    assert locked.get("/api/runs").status_code == 200  # the cookie now carries it


def test_open_server_needs_no_token(client: TestClient) -> None:
    assert client.get("/api/runs").status_code == 200
