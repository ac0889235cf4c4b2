"""The lane breakdown through the API."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_breakdown_lanes_devices_and_gap_causes(client: TestClient, run_id: str) -> None:
    body = client.get(f"/api/runs/{run_id}/breakdown").json()
    lanes = {lane["lane"]: lane for lane in body["lanes"]}
    assert lanes["hardware"]["busy_ns"] == 185_000 and lanes["hardware"]["idle_ns"] == 815_000
    assert lanes["framework"]["busy_ns"] == 1_000_000
    assert body["devices"][0]["executions"] == 3 and body["devices"][0]["busy_ns"] == 185_000
    gaps = body["gaps"]
    assert gaps["count"] == 2 and gaps["total_ns"] == 500_000 + 245_000
    assert [(g["start"], g["end"], g["cause"]) for g in gaps["largest"]] == [
        (200_000, 700_000, "launch latency"), (720_000, 965_000, "host busy")]
    assert gaps["largest"][0]["after"]["name"] == "mul_kernel"
