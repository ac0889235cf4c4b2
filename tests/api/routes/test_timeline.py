"""Timeline window: wide slices, per-pixel merges, counters, flows, track/lane filters, bad windows."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.api.conftest import assert_error


def _tracks(body: dict) -> dict[int, dict]:  # type: ignore[type-arg]
    return {t["track_id"]: t for t in body["tracks"]}


def test_full_window_has_every_slice_wide(client: TestClient, run_id: str) -> None:
    body = client.get(f"/api/runs/{run_id}/timeline?width_px=1000").json()
    assert body["origin_ns"] == 1_700_000_000_000_000_000 and body["start_ns"] == 0
    assert body["end_ns"] == 1_000_000 and body["ns_per_px"] == 1000.0
    framework = _tracks(body)[0]["slices"]
    names = [body["names"][i] for i in framework["name"]]
    assert names == ["ProfilerStep#1", "aten::linear", "aten::mul", "aten::add", "aten::addmm"]
    assert framework["ts"][:2] == [0, 10_000] and framework["depth"] == [0, 1, 1, 1, 2]
    assert sum(len(t["slices"]["id"]) for t in body["tracks"] if t["kind"] == "slice") == 12
    assert len(body["flows"]) == 3 and body["flows"][0] == {
        "id": 0, "from": 5, "to": 9, "kind": "execute", "from_track": 1, "to_track": 2,
        "from_ts": 30_000, "to_ts": 50_000}
    assert _tracks(body)[3]["counter"] == {"ts": [0, 100_000, 500_000], "value": [0.0, 1024.0, 512.0]}


def test_narrow_slices_merge_per_pixel(client: TestClient, run_id: str) -> None:
    body = client.get(f"/api/runs/{run_id}/timeline?width_px=10").json()  # 100 µs per pixel
    hw = _tracks(body)[2]
    assert [body["names"][i] for i in hw["slices"]["name"]] == ["gemm_kernel"]
    merged = hw["merged"]
    assert merged["count"] == [1, 1] and merged["ts"] == [700_000, 965_000]
    assert merged["busy_ns"] == [20_000, 15_000]
    assert [body["names"][i] for i in merged["name"]] == ["mul_kernel", "add_kernel"]


def test_window_finds_long_slice_starting_before_it(client: TestClient, run_id: str) -> None:
    body = client.get(f"/api/runs/{run_id}/timeline?start_ns=700000&end_ns=710000&width_px=100").json()
    fw = _tracks(body)[0]["slices"]
    assert [body["names"][i] for i in fw["name"]] == ["ProfilerStep#1"]
    hw = _tracks(body)[2]["slices"]
    assert [body["names"][i] for i in hw["name"]] == ["mul_kernel"]
    assert [f["to"] for f in body["flows"]] == [10]


def test_filters_by_tracks_and_lanes(client: TestClient, run_id: str) -> None:
    base = f"/api/runs/{run_id}/timeline"
    assert [t["track_id"] for t in client.get(f"{base}?tracks=2,3").json()["tracks"]] == [2, 3]
    assert [t["track_id"] for t in client.get(f"{base}?lanes=hardware,counter").json()["tracks"]] == [2, 3]
    assert [t["track_id"] for t in client.get(f"{base}?tracks=0,2&lanes=hardware").json()["tracks"]] == [2]


@pytest.mark.parametrize("query", [
    "start_ns=500&end_ns=100", "start_ns=5&end_ns=5", "width_px=0", "width_px=999999", "start_ns=abc",
    "tracks=a,b",
])
def test_bad_window_is_422(client: TestClient, run_id: str, query: str) -> None:
    assert_error(client.get(f"/api/runs/{run_id}/timeline?{query}"), 422, "validation")


def test_timeline_reports_server_time(client: TestClient, run_id: str) -> None:
    r = client.get(f"/api/runs/{run_id}/timeline")
    assert r.headers["server-timing"].startswith("app;dur=")
