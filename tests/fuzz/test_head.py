"""HEAD on the API (docs/API.md: a share token allows GET/HEAD on its run): the GET's status and headers,
no body; a share token opens HEAD on its run only. Found by probing what schemathesis cannot (HEAD is not in
the OpenAPI document): HEAD used to answer 405 everywhere."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from tests.api.conftest import TINY, assert_error, wait_until_done

TOKEN = "head-token"


def test_head_answers_as_get_without_a_body(tmp_path: Path) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(Settings(data_dir=tmp_path / "data", token=TOKEN))) as c:
        run_id = c.post("/api/runs", files={"files": ("t.json", TINY.read_bytes())}, headers=auth).json()["id"]
        c.cookies.set("explorer_token", TOKEN)
        assert wait_until_done(c, run_id)["status"] == "ready"
        c.cookies.clear()
        for path in (f"/api/runs/{run_id}", f"/api/runs/{run_id}/timeline", "/api/runs", "/-/health"):
            get, head = c.get(path, headers=auth), c.head(path, headers=auth)
            assert (head.status_code, head.content) == (200, b""), path
            assert head.headers["content-type"] == get.headers["content-type"]
            # the GET's own headers: its length on the wire (gzip when accepted) and its encoding
            assert head.headers["content-length"] == get.headers["content-length"]
            assert head.headers.get("content-encoding") == get.headers.get("content-encoding")
        token = c.post(f"/api/runs/{run_id}/share", headers=auth).json()["token"]
        share = {"X-Share-Token": token}
        assert c.head(f"/api/runs/{run_id}/ops", headers=share).status_code == 200
        assert c.head("/api/runs", headers=share).status_code == 401
        assert c.head(f"/api/runs/{run_id}").status_code == 401
        assert_error(c.get("/api/runs/nope", headers=auth), 404, "run_not_found")
        missing = c.head("/api/runs/nope", headers=auth)
        assert (missing.status_code, missing.content) == (404, b"")
        assert c.head(f"/api/runs/{run_id}/share", headers=auth).status_code == 405  # POST only
