"""Runs: upload lifecycle, list/filter/paginate, get summary, rename/tag, delete, tracks, errors."""

from __future__ import annotations

from fastapi.testclient import TestClient

from explorer.config import Settings
from tests.api.conftest import TINY, Uploader, assert_error, wait_until_done


def test_upload_reports_queued_then_ready_with_summary(client: TestClient, upload: Uploader) -> None:
    accepted = upload(wait=False, name="tiny", tags="a, b")
    assert accepted["status"] == "queued" and accepted["duplicate_of"] is None
    assert accepted["status_url"] == f"/api/runs/{accepted['id']}"
    ready = wait_until_done(client, accepted["id"])
    assert ready["status"] == "ready" and ready["progress"] == 1.0
    assert ready["name"] == "tiny" and ready["tags"] == ["a", "b"]
    s = ready["summary"]
    assert s["slices"] == 12 and s["slices_per_lane"] == {"framework": 5, "runtime": 4, "hardware": 3}
    assert s["span_ns"] == 1_000_000 and s["artifacts"][0]["name"] == TINY.name
    assert ready["links"]["timeline"] == f"/api/runs/{ready['id']}/timeline"


def test_list_filters_and_paginates(client: TestClient, upload: Uploader) -> None:
    upload(name="alpha", tags="x")
    upload(files=[("b.json", TINY.read_bytes().replace(b'"Fake GPU"', b'"Other GPU"'))], name="beta")
    everything = client.get("/api/runs").json()
    assert everything["total"] == 2
    assert [r["name"] for r in client.get("/api/runs?name=alp").json()["runs"]] == ["alpha"]
    assert [r["name"] for r in client.get("/api/runs?tag=x").json()["runs"]] == ["alpha"]
    page = client.get("/api/runs?limit=1&offset=1").json()
    assert page["total"] == 2 and len(page["runs"]) == 1
    assert_error(client.get("/api/runs?limit=0"), 422, "validation")


def test_patch_renames_and_tags(client: TestClient, run_id: str) -> None:
    r = client.patch(f"/api/runs/{run_id}", json={"name": "renamed", "tags": ["z", "y", "z"]})
    assert r.status_code == 200 and r.json()["name"] == "renamed" and r.json()["tags"] == ["y", "z"]
    assert_error(client.patch(f"/api/runs/{run_id}", json={"name": ""}), 422, "validation")


def test_delete_removes_every_file(client: TestClient, run_id: str, settings: Settings) -> None:
    run_dir = settings.data_dir / "runs" / run_id
    assert run_dir.is_dir()
    assert client.delete(f"/api/runs/{run_id}").status_code == 204
    assert not run_dir.exists()
    assert not any(p.name.startswith("upload-") for p in (settings.data_dir / "tmp").iterdir())
    assert_error(client.get(f"/api/runs/{run_id}"), 404, "run_not_found")


def test_tracks_lists_lanes_and_counts(client: TestClient, run_id: str) -> None:
    body = client.get(f"/api/runs/{run_id}/tracks").json()
    assert body["origin_ns"] == 1_700_000_000_000_000_000
    assert [(t["lane"], t["kind"], t["count"]) for t in body["tracks"]] == [
        ("framework", "slice", 5), ("runtime", "slice", 4), ("hardware", "slice", 3), ("counter", "counter", 3)]


def test_unknown_run_is_404_everywhere(client: TestClient) -> None:
    for path in ("", "/tracks", "/timeline", "/events/0", "/search?q=a", "/ops", "/breakdown"):
        assert_error(client.get(f"/api/runs/nope{path}"), 404, "run_not_found")
    assert_error(client.patch("/api/runs/nope", json={"name": "x"}), 404, "run_not_found")
    assert_error(client.delete("/api/runs/nope"), 404, "run_not_found")
    assert_error(client.post("/api/runs/nope/sql", json={"sql": "select 1"}), 404, "run_not_found")


def test_unknown_route_uses_the_error_shape(client: TestClient) -> None:
    assert_error(client.get("/api/nothing-here"), 404, "not_found")


def test_health_version_docs(client: TestClient) -> None:
    assert client.get("/-/health").json() == {"status": "ok"}
    assert "version" in client.get("/-/version").json()
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert "/api/runs/{run_id}/timeline" in paths and "multipart/form-data" in str(paths["/api/runs"])


def test_plotly_is_served_locally(client: TestClient) -> None:
    r = client.get("/static/vendor/plotly.min.js")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/javascript")
