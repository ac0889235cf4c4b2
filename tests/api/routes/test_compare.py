"""Runs compared through the API."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.conftest import TINY, Uploader, assert_error


def test_compare_runs(client: TestClient, upload: Uploader) -> None:
    a = upload(name="before")["id"]
    faster = TINY.read_bytes().replace(b'"dur": 150.0', b'"dur": 50.0').replace(b'"aten::add"', b'"aten::sub"')
    b = upload(files=[("after.json", faster)], name="after")["id"]
    body = client.get(f"/api/compare?runs={a},{b}").json()
    assert [r["name"] for r in body["runs"]] == ["before", "after"]
    rows = {r["name"]: r for r in body["rows"]}
    addmm = rows["aten::addmm"]["vs_baseline"][0]
    assert rows["aten::addmm"]["status"] == "common" and addmm["device_total_ns"] == -100_000
    assert round(addmm["pct_change"], 1) == -66.7
    assert rows["aten::add"]["status"] == "removed" and rows["aten::add"]["per_run"][1] is None
    assert rows["aten::sub"]["status"] == "added" and rows["aten::sub"]["vs_baseline"][0]["pct_change"] is None
    assert body["headline"]["secondary"]["totals_ns"] == [185_000, 85_000] and body["headline"]["baseline"] == a


def test_compare_errors(client: TestClient, run_id: str) -> None:
    assert_error(client.get(f"/api/compare?runs={run_id}"), 400, "bad_request")
    assert_error(client.get(f"/api/compare?runs={run_id},nope"), 404, "run_not_found")
    assert_error(client.get("/api/compare"), 422, "validation")
