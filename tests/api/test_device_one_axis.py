"""Host and device on one time axis: the device export with its host clock moved (tests/helpers/neuron_shifted.py),
through the timeline's routes. Every device event's time equals its row's own `start_ts` plus the shift computed
here from the files (the smallest that puts the profile inside its nc_exec_running slice), lies inside that slice,
and the counters, range summaries, the execution slice's "open device profile" span and the chain routes follow
the same shift; the host CPU and memory counters share the window."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths
from tests.helpers.neuron_shifted import EXPORT, expected_placement, rows_of, write_shifted_export

PROFILES = ("matmul", "rmsnorm_naive")
SLICE_TABLES = ("Instruction", "DmaPacket", "CcInstruction")


@pytest.fixture(scope="module")
def shifted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str, Path, str]]:
    root = tmp_path_factory.mktemp("one_axis")
    export = write_shifted_export(root)
    app = create_app(Settings(data_dir=root / "data"))
    run = ingest_paths(app.state.explorer.store, [export], "one axis").id
    plain = ingest_paths(app.state.explorer.store, [EXPORT], "as captured").id
    with TestClient(app) as client:
        yield client, run, export, plain


def _device_events(client: TestClient, run: str) -> list[dict[str, Any]]:
    """Every device slice's details (ids from the first after the run's own slices until the first unknown)."""
    first = client.get(f"/api/runs/{run}").json()["summary"]["slices"]
    out = []
    while (r := client.get(f"/api/runs/{run}/events/{first + len(out)}")).status_code == 200:
        out.append(r.json()["event"])
    return out


def _exact(value: Any) -> int:
    return int(Decimal(str(value)))  # epoch ns beyond 2**53 come as decimal text


def test_every_device_event_on_the_host_clock(shifted: tuple[TestClient, str, Path, str]) -> None:
    client, run, export, _ = shifted
    origin = client.get(f"/api/runs/{run}/timeline", params={"width_px": 10}).json()["origin_ns"]
    events = _device_events(client, run)
    want_count = sum(len(rows_of(export / f"{p}@latest", t)) for p in PROFILES for t in SLICE_TABLES)
    assert len(events) == want_count > 100
    place = {p: expected_placement(export, p) for p in PROFILES}
    assert place["matmul"]["shift"] == -4021 and place["rmsnorm_naive"]["shift"] == -4321  # the fixture's story
    for e in events:
        at = place[e["device_profile"]]
        start, end = _exact(e["args"]["start_ts"]), _exact(e["args"]["end_ts"])
        assert e["ts_ns"] == start + at["shift"] == origin + e["ts_rel_ns"]
        assert e["dur_ns"] == end - start
        assert at["exec_start"] <= e["ts_ns"] and e["ts_ns"] + e["dur_ns"] <= at["exec_end"]


def test_the_alignment_route(shifted: tuple[TestClient, str, Path, str]) -> None:
    client, run, export, _ = shifted
    origin = client.get(f"/api/runs/{run}/timeline", params={"width_px": 10}).json()["origin_ns"]
    got = {p["profile_id"]: p for p in client.get(f"/api/runs/{run}/timeline/device-alignment").json()["profiles"]}
    assert set(got) == set(PROFILES)
    for name in PROFILES:
        at, p = expected_placement(export, name), got[name]
        al = p["alignment"]
        assert (al["method"], al["shift_ns"], al["shift_min_ns"], al["shift_max_ns"]) == (
            "execution_slice", at["shift"], at["shift_min"], at["shift_max"])
        before, after = at["first"] - at["exec_start"], at["exec_end"] - at["last"]
        assert al["within"] is False and al["uncertainty_ns"] == max(-min(before, 0), -min(after, 0))
        assert (p["start_ns"], p["end_ns"]) == (at["first"] + at["shift"] - origin, at["last"] + at["shift"] - origin)
        link = client.get(f"/api/runs/{run}/events/{p['system_slice_id']}").json()["device_profile"]
        assert (link["start_ns"], link["end_ns"], link["alignment"]) == (p["start_ns"], p["end_ns"], al)
    assert client.get(f"/api/runs/{run}/timeline/device-alignment").headers["content-type"].startswith("application/json")


def test_window_slices_and_counters_shifted(shifted: tuple[TestClient, str, Path, str]) -> None:
    """A device engine row and its HBM throughput counter in one window with the host CPU and memory counters:
    each at its file's times plus the shift (host rows at their own)."""
    client, run, export, _ = shifted
    at = expected_placement(export, "matmul")
    tracks = client.get(f"/api/runs/{run}/tracks").json()["tracks"]
    engine = next(t for t in tracks if t.get("device_profile") == "matmul" and t["label"] == "TensorMatrix")
    hbm = next(t for t in tracks if t.get("device_profile") == "matmul" and t["label"].startswith("HBM throughput"))
    cpu = [t for t in tracks if t["lane"] == "counter" and t["label"].startswith("CPU")]
    mem = [t for t in tracks if t["lane"] == "counter" and t["label"].startswith("host memory")]
    assert cpu and mem
    ids = ",".join(str(t["track_id"]) for t in [engine, hbm, *cpu, *mem])
    span = client.get(f"/api/runs/{run}").json()["summary"]["span_ns"]
    w = client.get(f"/api/runs/{run}/timeline", params={"start_ns": 0, "end_ns": span, "width_px": 20000,
                                                         "tracks": ids}).json()
    by_id = {t["track_id"]: t for t in w["tracks"]}
    origin = w["origin_ns"]
    rows = rows_of(export / "matmul@latest", "Instruction")
    want = sorted(int(r["start_ts"]) + at["shift"] for r in rows if r["timeline_track"] == "TensorMatrix")
    assert [origin + t for t in by_id[engine["track_id"]]["slices"]["ts"]] == want
    hbm_rows = rows_of(export / "matmul@latest", "HbmUsage")
    assert [origin + t for t in by_id[hbm["track_id"]]["counter"]["ts"]] == sorted(
        int(r["timestamp"]) + at["shift"] for r in hbm_rows)
    cpu_ts = sorted({int(r["timestamp"]) for r in rows_of(export / "system@latest", "CpuUsage")})
    drawn = sorted({origin + t for c in cpu for t in by_id[c["track_id"]]["counter"]["ts"]})
    assert drawn == cpu_ts  # host counters stay on the host clock


def test_range_summary_and_chain_follow_the_shift(shifted: tuple[TestClient, str, Path, str]) -> None:
    """The device Summary of the profile's span on the timeline equals that of the same profile captured with
    the clocks in agreement; a chain's nodes sit where their events are drawn."""
    client, run, _, plain = shifted
    def summary(r: str) -> dict[str, Any]:
        p = next(x for x in client.get(f"/api/runs/{r}/timeline/device-alignment").json()["profiles"]
                 if x["profile_id"] == "matmul")
        got = client.get(f"/api/runs/{r}/timeline/device-summary",
                         params={"start_ns": p["start_ns"], "end_ns": p["end_ns"]}).json()["summaries"]
        mine = [s for s in got if s["profile"] == "matmul"]
        assert len(mine) == 1 and (mine[0]["start_ns"], mine[0]["end_ns"]) == (p["start_ns"], p["end_ns"])
        return dict(mine[0]["metrics"])
    assert summary(run) == summary(plain)
    flow = rows_of(EXPORT / "matmul@latest", "Flow")
    target = next(r for r in flow if r["out_table"] == "Instruction")
    node = f"Instruction:{target['out_id']}"
    chain = client.get(f"/api/runs/{run}/timeline/device-chain",
                       params={"profile": "matmul", "node": node, "mode": "trace"}).json()
    page = client.get(f"/api/runs/{run}/device/matmul/chain", params={"node": node, "mode": "trace"}).json()
    assert chain["items"][-1]["ts_rel_ns"] == page["node"]["start_ns"]
    assert len(chain["items"]) == len(page["steps"]) + 1
    assert page["upstream"] and page["upstream"][0]["upstream"]["start_ns"] == next(
        e for e in _device_events(client, run) if e["device_profile"] == "matmul" and e["cat"] == "Instruction"
        and e["args"]["id"] == target["in_id"])["ts_rel_ns"]  # the chain page's times are the timeline's
    for item in chain["items"]:
        event = client.get(f"/api/runs/{run}/events/{item['slice_id']}").json()["event"]
        assert (event["ts_rel_ns"], event["dur_ns"], event["args"]["id"]) == (item["ts_rel_ns"], item["dur_ns"], item["id"])


def test_the_device_page_says_so(shifted: tuple[TestClient, str, Path, str]) -> None:
    """The device page states the shift and opens the timeline on the profile's span there."""
    client, run, export, _ = shifted
    at = expected_placement(export, "matmul")
    p = next(x for x in client.get(f"/api/runs/{run}/timeline/device-alignment").json()["profiles"]
             if x["profile_id"] == "matmul")
    html = client.get(f"/runs/{run}/device/matmul").text
    statement = html.split('id="device-alignment"', 1)[1].split("</p>", 1)[0]
    assert "shifted by -4.021 µs onto the host clock" in statement and at["shift"] == -4021
    assert f"timeline?start={p['start_ns']}&amp;end={p['end_ns']}" in html
