"""Share links: create, list, revoke; a share token opens one run read-only on a token-protected server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from tests.api.conftest import TINY, assert_error, wait_until_done

TOKEN = "s3cret-token"


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(data_dir=tmp_path / "data", token=TOKEN))) as c:
        yield c


def _ready_run(client: TestClient, content: bytes = b"") -> str:
    data = content or TINY.read_bytes()
    r = client.post("/api/runs", files={"files": ("t.json", data)}, headers={"Authorization": f"Bearer {TOKEN}"})
    run_id: str = r.json()["id"]
    client.cookies.set("explorer_token", TOKEN)
    assert wait_until_done(client, run_id)["status"] == "ready"
    client.cookies.clear()
    return run_id


def test_create_list_revoke(client: TestClient, run_id: str) -> None:
    r = client.post(f"/api/runs/{run_id}/share")
    assert r.status_code == 201
    share = r.json()
    assert share["url"] == f"/s/{share['token']}" and share["run_id"] == run_id
    assert [s["token"] for s in client.get(f"/api/runs/{run_id}/shares").json()["shares"]] == [share["token"]]
    assert client.get(f"/api/s/{share['token']}").json()["run_id"] == run_id
    assert client.delete(f"/api/runs/{run_id}/shares/{share['token']}").status_code == 204
    assert client.get(f"/api/runs/{run_id}/shares").json()["shares"][0]["revoked"] is True
    assert_error(client.get(f"/api/s/{share['token']}"), 404, "share_not_found")
    assert_error(client.delete(f"/api/runs/{run_id}/shares/nope"), 404, "share_not_found")


def test_share_link_opens_one_run_read_only(locked: TestClient) -> None:
    run_id = _ready_run(locked)
    other = _ready_run(locked, TINY.read_bytes().replace(b"Fake GPU", b"Other GPU"))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    token = locked.post(f"/api/runs/{run_id}/share", headers=auth).json()["token"]
    assert_error(locked.get(f"/api/runs/{run_id}"), 401, "unauthorized")
    landing = locked.get(f"/api/s/{token}")  # the share page's JSON twin sets the share cookie
    assert landing.status_code == 200 and "explorer_share" in landing.headers["set-cookie"]
    assert locked.get(f"/api/runs/{run_id}").status_code == 200
    assert locked.get(f"/api/runs/{run_id}/timeline").status_code == 200
    assert locked.post(f"/api/runs/{run_id}/sql", json={"sql": "select 1"}).status_code == 200
    assert_error(locked.get(f"/api/runs/{other}"), 401, "unauthorized")
    assert_error(locked.get("/api/runs"), 401, "unauthorized")
    assert_error(locked.delete(f"/api/runs/{run_id}"), 401, "unauthorized")
    assert_error(locked.patch(f"/api/runs/{run_id}", json={"name": "x"}), 401, "unauthorized")
    assert_error(locked.post(f"/api/runs/{run_id}/share"), 401, "unauthorized")
    assert_error(locked.get(f"/api/runs/{run_id}/shares"), 401, "unauthorized")
    locked.cookies.clear()
    assert locked.get(f"/api/runs/{run_id}/ops", headers={"X-Share-Token": token}).status_code == 200
    locked.delete(f"/api/runs/{run_id}/shares/{token}", headers=auth)
    assert_error(locked.get(f"/api/runs/{run_id}", headers={"X-Share-Token": token}), 401, "unauthorized")
