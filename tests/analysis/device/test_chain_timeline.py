"""A traced dependency chain placed on the timeline (GET /api/runs/{id}/timeline/device-chain), on the constructed
profile of tests/api/test_device_chain.py whose root cause is known: the walk in time order (root first), each node
on its own device slice (the slice's details name the same row), its links' waits recomputed there in plain Python."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths
from tests.api.test_device_chain import PACKETS, plain_nodes, plain_wait, write_profile
from tests.helpers.device_tables import BASE_NS


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str]]:
    tmp = tmp_path_factory.mktemp("chain_timeline")
    app = create_app(Settings(data_dir=tmp / "data"))
    run = ingest_paths(app.state.explorer.store, [write_profile(tmp)], "chain").id
    with TestClient(app) as client:
        yield client, run


def test_trace_to_root_cause_on_the_timeline(served: tuple[TestClient, str]) -> None:
    client, run = served
    body = client.get(f"/api/runs/{run}/timeline/device-chain",
                      params={"profile": "chain", "node": "Instruction:30", "mode": "trace"}).json()
    origin = client.get(f"/api/runs/{run}/timeline", params={"width_px": 10}).json()["origin_ns"]
    nodes = plain_nodes()
    walk = [("Instruction", 10), ("DmaPacket", 20), ("Instruction", 30)]
    assert [(i["table"], i["id"]) for i in body["items"]] == walk
    assert [i["role"] for i in body["items"]] == ["root", "step", "node"] and body["root"] == 0
    assert body["shift_ns"] == 0  # a profile without a system half: drawn on its own clock
    assert [(lk["up"], lk["down"], lk["wait_ns"]) for lk in body["links"]] == [
        (0, 1, plain_wait(nodes[walk[1]], nodes[walk[0]])), (1, 2, plain_wait(nodes[walk[2]], nodes[walk[1]]))]
    assert [lk["wait_ns"] for lk in body["links"]] == [2500, 4000] and body["total_wait_ns"] == 6500
    for item, key in zip(body["items"], walk, strict=True):
        n = nodes[key]
        assert (item["ts_rel_ns"], item["wait_start_ns"], item["run_ns"]) == (
            BASE_NS + n["start"] - origin, BASE_NS + n["ready"] - origin, BASE_NS + n["run"] - origin)
        event = client.get(f"/api/runs/{run}/events/{item['slice_id']}").json()["event"]
        assert (event["cat"], event["args"]["id"], event["track_id"]) == (key[0], key[1], item["track_id"])
        assert event["ts_rel_ns"] == item["ts_rel_ns"]  # a transfer's slice is its first packet
    first_packet = min(s for i, _q, s, _e in PACKETS if i == 20)
    assert body["items"][1]["ts_rel_ns"] == BASE_NS + first_packet - origin
    assert (body["start_ns"], body["end_ns"]) == (min(BASE_NS + nodes[k]["ready"] for k in walk) - origin,
                                                  max(BASE_NS + nodes[k]["end"] for k in walk) - origin)


def test_one_step_and_errors(served: tuple[TestClient, str]) -> None:
    client, run = served
    url = f"/api/runs/{run}/timeline/device-chain"
    step = client.get(url, params={"profile": "chain", "node": "Instruction:30", "mode": "step"}).json()
    assert [(i["table"], i["id"], i["role"]) for i in step["items"]] == [("DmaPacket", 20, "step"),
                                                                         ("Instruction", 30, "node")]
    assert step["root"] is None
    assert client.get(url, params={"profile": "nope", "node": "Instruction:30"}).status_code == 404
    for node in ("Instruction:999", "Bogus:1"):
        resp = client.get(url, params={"profile": "chain", "node": node})
        assert resp.status_code == 400 and resp.json()["error"]["code"] == "bad_request"
    assert client.get(url, params={"profile": "chain", "node": "Instruction:30", "mode": "sideways"}).status_code == 422
