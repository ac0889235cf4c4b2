"""Device dependency chains on a constructed profile whose root cause is known: a Vector instruction waits on a
DMA transfer (its semaphore wait ends when the transfer completes) whose queue waited on a Scalar instruction; the
Scalar instruction itself waited on nothing. Trace to the root cause ends at it; every wait is recomputed here
from the rows in plain Python (the documented rule: the part of the waiter's waiting interval before its upstream
completed)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.notebook import open_run
from explorer.runs.ingest import ingest_paths
from tests.helpers.device_tables import BASE_NS, DMA_PACKET, INSTRUCTION, metadata

# (id, engine, opcode, start, end, evt_wait) relative to BASE_NS
INSTRUCTIONS = [(5, "sync", "EventSet", 0, 500, 0), (10, "scalar", "ACTIVATE", 1000, 4000, 0),
                (11, "gpsimd", "Iota", 1000, 2000, 0), (12, "Tensor", "LoadStationary", 0, 2500, 0),
                (30, "vector", "TensorTensor", 2000, 7000, 4000), (40, "sync", "EventWait", 7000, 7100, 50)]
# (id, queue, start, end): transfer 20 is two packets; 19 came before it on the same queue
PACKETS = [(19, "qSyncIO0", 500, 1500), (20, "qSyncIO0", 4200, 5200), (20, "qSyncIO0", 5200, 6000)]
# (in table, in id, out table, out id, dependency type): in -> out, out waits on in
FLOWS = [("Instruction", 5, "Instruction", 10, "semaphore"), ("Instruction", 10, "DmaPacket", 20, "dma_trigger"),
         ("Instruction", 11, "DmaPacket", 20, "dma_trigger"), ("DmaPacket", 20, "Instruction", 30, "dma_completion"),
         ("Instruction", 12, "Instruction", 30, "semaphore"), ("Instruction", 30, "Instruction", 40, "semaphore")]
SPAN = 8000


def write_profile(root: Path) -> Path:
    folder = root / "export" / "chain@latest"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{
        "start_ts": BASE_NS + s, "end_ts": BASE_NS + e, "duration_ns": e - s, "engine": eng, "timeline_track": eng,
        "pcore_idx": 0, "opcode": op, "operands": "", "id": i, "pc": i, "bir_id": f"b{i}", "evt_wait_time_ns": w,
    } for i, eng, op, s, e, w in INSTRUCTIONS], schema=INSTRUCTION), folder / "Instruction.parquet")
    pq.write_table(pa.Table.from_pylist([{
        "start_ts": BASE_NS + s, "end_ts": BASE_NS + e, "duration_ns": e - s, "pcore_idx": 0, "id": i,
        "packet_idx": k, "packet_aggregation_id": i, "read_bytes": 4096, "write_bytes": 4096, "transfer_bytes": 4096,
        "throughput": 1.0, "queue_type": "data", "queue_name": q, "crc": 0,
    } for k, (i, q, s, e) in enumerate(PACKETS)], schema=DMA_PACKET), folder / "DmaPacket.parquet")
    pq.write_table(pa.Table.from_pylist([{"in_id": a, "out_id": b, "in_table": ta, "out_table": tb,
                                          "dependency_type": kind, "gap_time": 0} for ta, a, tb, b, kind in FLOWS]),
                   folder / "Flow.parquet")
    pq.write_table(metadata(SPAN), folder / "Metadata.parquet")
    return root / "export"


def plain_nodes() -> dict[tuple[str, int], dict[str, Any]]:
    """Each node's lane, span and waiting interval, from the rows above."""
    nodes: dict[tuple[str, int], dict[str, Any]] = {}
    for i, eng, _op, s, e, w in INSTRUCTIONS:
        nodes[("Instruction", i)] = {"lane": eng.lower(), "start": s, "end": e, "ready": s, "run": s + min(w, e - s)}
    for i, q, s, e in PACKETS:
        n = nodes.setdefault(("DmaPacket", i), {"lane": q, "start": s, "end": e})
        n["start"], n["end"] = min(n["start"], s), max(n["end"], e)
    for key, n in nodes.items():
        if key[0] == "DmaPacket":
            before = [e for i, q, s, e in PACKETS if q == n["lane"] and i != key[1] and e <= n["start"]]
            n["ready"], n["run"] = (max(before) if before else 0), n["start"]
    return nodes


def plain_wait(down: dict[str, Any], up: dict[str, Any]) -> int:
    return max(0, min(down["run"], up["end"]) - down["ready"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str, int, Path]]:
    tmp = tmp_path_factory.mktemp("chain")
    data = tmp / "data"
    app = create_app(Settings(data_dir=data))
    run = ingest_paths(app.state.explorer.store, [write_profile(tmp)], "chain").id
    with TestClient(app) as client:
        origin = client.get(f"/api/runs/{run}/device/profiles").json()["origin_ns"]
        yield client, run, origin, data


def test_trace_to_root_cause_ends_at_the_scalar_instruction(served: tuple[TestClient, str, int, Path]) -> None:
    client, run, origin, _ = served
    body = client.get(f"/api/runs/{run}/device/chain/chain?node=Instruction:30&mode=trace").json()
    nodes = plain_nodes()
    # the walk by hand: from the vector instruction, follow the upstream that completed last while it waited
    expected, current = [], ("Instruction", 30)
    while True:
        ups = [(ta, a) for ta, a, tb, b, _k in FLOWS if (tb, b) == current]
        if not ups:
            break
        last = max(ups, key=lambda u: (min(nodes[current]["run"], nodes[u]["end"]), nodes[u]["end"]))
        wait = plain_wait(nodes[current], nodes[last])
        if wait == 0:
            break
        expected.append((current, last, wait))
        current = last
    assert current == ("Instruction", 10)  # the constructed root cause
    assert [((s["downstream"]["table"], s["downstream"]["id"]), (s["upstream"]["table"], s["upstream"]["id"]),
             s["wait_ns"]) for s in body["steps"]] == expected
    assert [w for *_, w in expected] == [4000, 2500]
    assert (body["root"]["table"], body["root"]["id"], body["root"]["lane"]) == ("Instruction", 10, "scalar")
    assert body["total_wait_ns"] == 6500
    assert body["wait_by_lane"] == [{"lane": "vector", "wait_ns": 4000}, {"lane": "qSyncIO0", "wait_ns": 2500}]
    assert body["steps"][1]["upstream"]["start_ns"] == BASE_NS + 1000 - origin  # times relative to the run


def test_every_edge_wait_of_every_node(served: tuple[TestClient, str, int, Path]) -> None:
    client, run, _, _ = served
    nodes = plain_nodes()
    for key in nodes:
        body = client.get(f"/api/runs/{run}/device/chain/chain?node={key[0]}:{key[1]}&mode=step").json()
        ups = {(e["upstream"]["table"], e["upstream"]["id"]): e["wait_ns"] for e in body["upstream"]}
        downs = {(e["downstream"]["table"], e["downstream"]["id"]): e["wait_ns"] for e in body["downstream"]}
        assert ups == {(ta, a): plain_wait(nodes[key], nodes[(ta, a)])
                       for ta, a, tb, b, _k in FLOWS if (tb, b) == key}, key
        assert downs == {(tb, b): plain_wait(nodes[(tb, b)], nodes[key])
                         for ta, a, tb, b, _k in FLOWS if (ta, a) == key}, key
        assert body["node"]["wait_ns"] == nodes[key]["run"] - nodes[key]["ready"]
        assert len(body["steps"]) <= 1


def test_one_step_up_and_errors(served: tuple[TestClient, str, int, Path]) -> None:
    client, run, _, _ = served
    step = client.get(f"/api/runs/{run}/device/chain/chain?node=Instruction:30&mode=step").json()
    assert [(s["upstream"]["table"], s["upstream"]["id"]) for s in step["steps"]] == [("DmaPacket", 20)]
    assert step["root"] is None
    unwaited = client.get(f"/api/runs/{run}/device/chain/chain?node=Instruction:40&mode=trace").json()
    assert unwaited["steps"] == [] and unwaited["root"]["id"] == 40  # it waited, but not on its upstream
    for query in ("node=Instruction:999", "node=Bogus:1", "node=Instruction:30&mode=sideways"):
        resp = client.get(f"/api/runs/{run}/device/chain/chain?{query}")
        assert resp.status_code == 400 and "Traceback" not in resp.text


def test_the_chain_page_lists_the_trace(served: tuple[TestClient, str, int, Path]) -> None:
    client, run, _, _ = served
    resp = client.get(f"/runs/{run}/device/chain/chain?node=Instruction:30&mode=trace")
    assert resp.status_code == 200
    root = re.search(r'<p id="chain-root".*?</p>', resp.text, re.S)
    assert root and 'data-node="Instruction:10"' in root.group(0) and "<b>scalar</b>" in root.group(0)
    assert resp.text.count('<tr data-step="') == 2
    drawing = re.search(r'<div class="panel" id="chain-drawing".*?</svg>', resp.text, re.S)
    assert drawing, "the chain is not drawn"
    bars = re.findall(r'<g class="chain-bar" data-node="([^"]+)"', drawing.group(0))
    assert bars == ["Instruction:10", "DmaPacket:20", "Instruction:30"]  # root first
    assert drawing.group(0).count('class="chain-arrow"') == 2


def test_the_notebook_api_gives_the_same_chain(served: tuple[TestClient, str, int, Path]) -> None:
    client, run, _, data = served
    nb = open_run(run, data_dir=data)
    assert nb.device_chain("chain", "Instruction:30") == client.get(
        f"/api/runs/{run}/device/chain/chain?node=Instruction:30&mode=trace").json()
