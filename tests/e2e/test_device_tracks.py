"""End-to-end: the device tracks of a Neuron device profile in the timeline (tests/fixtures/neuron/
device_export): selecting an nc_exec_running offers "open device profile", which opens the profile's engine,
DMA and counter tracks and zooms to it; a shift+drag range shows the device Summary beside the op list,
with the numbers the API computes for that range."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from urllib.request import urlopen

import pyarrow.parquet as pq
import pytest

from tests.helpers.support import shift_drag

pytestmark = [pytest.mark.browser, pytest.mark.slow]

EXPORT = Path(__file__).resolve().parent.parent / "fixtures" / "neuron" / "device_export"


def api(server: Any, path: str, **query: Any) -> Any:
    with urlopen(f"{server.url}{path}?{urlencode(query)}") as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def device_run(server: Any) -> str:
    from explorer.runs.ingest import ingest_paths

    return ingest_paths(server.state.store, [EXPORT], "device export").id


def test_open_device_profile_and_range_summary(page: Any, server: Any, device_run: str, shot: Any) -> None:
    rid = device_run
    [profile] = [p for p in server.state.store.device_profiles(rid).to_pylist() if p["profile_id"] == "rmsnorm_naive"]
    tracks = [t for t in api(server, f"/api/runs/{rid}/tracks")["tracks"] if t.get("device_profile") == "rmsnorm_naive"]
    engine_rows = {r["timeline_track"] for r in pq.read_table(EXPORT / "rmsnorm_naive@latest" / "Instruction_0.parquet")
                   .to_pylist()}
    page.goto(f"{server.url}/runs/{rid}/timeline")
    page.wait_for_selector("#timeline[data-ready='1']")
    drawn = "() => TE.timelineApi.rows().filter(r => r.kind === 'track').map(r => r.trackId)"
    assert not set(page.evaluate(drawn)) & {t["track_id"] for t in tracks}  # closed until opened
    shot(page, "n11-01-device-closed")

    page.evaluate("id => TE.timelineApi.select(id)", profile["system_slice_id"])
    page.wait_for_selector("#tl-open-device")
    assert "rmsnorm_naive" in page.inner_text("#tl-open-device")
    page.click("#tl-open-device")
    ids = {t["track_id"] for t in tracks}
    page.wait_for_function(f"() => {json.dumps(sorted(ids))}.every(id => ({drawn})().includes(id))")
    origin = int(api(server, f"/api/runs/{rid}")["summary"]["start_ns"])
    view = page.evaluate("() => TE.timelineApi.view()")
    assert view["start"] <= profile["start_ns"] - origin and view["end"] >= profile["end_ns"] - origin
    assert view["end"] - view["start"] < 1.2 * (profile["end_ns"] - profile["start_ns"])  # zoomed to it
    labels = {t["label"] for t in tracks if t["group"].endswith("engines")}
    assert labels == engine_rows | {r["timeline_track"] for r in pq.read_table(
        EXPORT / "rmsnorm_naive@latest" / "Instruction_1.parquet").to_pylist()}
    page.wait_for_function("() => TE.timelineApi.covered()")
    on_screen = page.evaluate("() => TE.timelineApi.visibleSlices().map(s => s.name)")
    assert "TensorTensorOp" in on_screen  # a Vector instruction of the fixture, drawn
    assert any(t["label"].startswith("qInput") for t in tracks)
    shot(page, "n11-02-device-open")

    # an instruction's details: its fields and its Flow dependencies as the chain
    flows = pq.read_table(EXPORT / "rmsnorm_naive@latest" / "Flow.parquet").to_pylist()
    insts = [r for part in ("Instruction_0", "Instruction_1")
             for r in pq.read_table(EXPORT / "rmsnorm_naive@latest" / f"{part}.parquet").to_pylist()]
    inst = next(r for r in insts if r["evt_wait_time_ns"] and any(f["out_id"] == r["id"] for f in flows))
    [vector_track] = [t["track_id"] for t in tracks if t["label"] == inst["timeline_track"]]
    window = api(server, f"/api/runs/{rid}/timeline", start_ns=profile["start_ns"] - origin,
                 end_ns=profile["end_ns"] - origin, width_px=20000, profile="rmsnorm_naive")
    [drawn_track] = [t for t in window["tracks"] if t["track_id"] == vector_track]
    sid = drawn_track["slices"]["id"][drawn_track["slices"]["ts"].index(inst["start_ts"] - origin)]
    page.evaluate("id => TE.timelineApi.select(id)", sid)
    page.wait_for_selector("#tl-chain")
    side = page.inner_text("#tl-details")
    assert inst["opcode"] in side and inst["operands"] in side and str(inst["evt_wait_time_ns"]) in side
    assert str(inst["start_ts"]) in side  # the epoch-ns time exactly, not rounded by a JSON number
    assert "depends on" in page.inner_text("#tl-chain")
    shot(page, "n11-02b-instruction-details")

    box = page.locator("#tl-canvas").bounding_box()
    vector = page.evaluate("(ids) => TE.timelineApi.rows().find(r => r.kind === 'track' && ids.includes(r.trackId)).top",
                           [t["track_id"] for t in tracks if t["label"] == "Vector"])
    y = box["y"] + vector + 8
    shift_drag(page, y, box["x"] + 500, box["x"] + 900)
    page.wait_for_selector("#tl-range-device h3")
    a, b = page.evaluate("() => TE.timelineApi.range()")
    want = api(server, f"/api/runs/{rid}/timeline/device-summary", start_ns=math.floor(a), end_ns=math.ceil(b))["summaries"]
    [mine] = [s for s in want if s["profile"] == "rmsnorm_naive"]
    text = page.inner_text("#tl-range-device")
    assert "Device rmsnorm_naive" in text
    assert f"{100 * mine['metrics']['vector_engine_active_time_percent']:.1f} %" in text
    assert f"{mine['metrics']['vector_engine_instruction_count']:,} instructions" in text
    shot(page, "n11-03-device-range")

    # colour by PyTorch op: the instructions are named (and coloured) by their layer
    layers = {r["layer"] for part in ("Instruction_0", "Instruction_1")
              for r in pq.read_table(EXPORT / "rmsnorm_naive@latest" / f"{part}.parquet").to_pylist() if r["layer"]}
    fetched = page.evaluate("() => TE.timelineApi.fetches()")
    page.select_option("#tl-device-color", "layer")
    page.wait_for_function(f"() => TE.timelineApi.fetches() > {fetched}")
    names = set(page.evaluate("() => TE.timelineApi.visibleSlices().map(s => s.name)"))
    assert names & layers and "TensorTensorOp" not in names
    shot(page, "n11-04-device-colour-by-op")
