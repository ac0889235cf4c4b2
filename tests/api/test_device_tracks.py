"""Device tracks of Neuron device profiles in the timeline (tests/fixtures/neuron/device_export): one track
per engine row, DMA queue and counter, their window data, the link from nc_exec_running, instruction details
with their Flow dependencies, and the device Summary of a range. Expected values are read from the fixture's
Parquet files row by row, never from the code under test.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections import defaultdict
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from api.app import create_app
from explorer.config import Settings
from explorer.model.shapes import EventDetail, RangeDeviceSummaries, TimelineWindow, Tracks
from tests.api.conftest import wait_until_done
from tests.helpers.device_tables import reference_summary

EXPORT = Path(__file__).resolve().parent.parent / "fixtures" / "neuron" / "device_export"
PROFILES = ("matmul", "rmsnorm_naive")


def rows(profile: str, table: str) -> list[dict[str, Any]]:
    folder = EXPORT / f"{profile}@latest"
    files = sorted(folder.glob(f"{table}_*.parquet")) or [folder / f"{table}.parquet"]
    return [r for f in files if f.exists() for r in pq.read_table(f).to_pylist()]


def arrow(profile: str, table: str) -> pa.Table:
    return pa.Table.from_pylist(rows(profile, table))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str, int]]:
    """(client, run id, origin ns) of the fixture export uploaded as a .tar.gz."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(EXPORT, arcname="device_export")
    settings = Settings(data_dir=tmp_path_factory.mktemp("device_tracks") / "data")
    with TestClient(create_app(settings)) as client:
        r = client.post("/api/runs", files=[("files", ("export.tar.gz", buf.getvalue()))])
        run = wait_until_done(client, r.json()["id"])
        assert run["status"] == "ready", run
        yield client, run["id"], int(run["summary"]["start_ns"])


def device_tracks(client: TestClient, run_id: str) -> list[dict[str, Any]]:
    body = client.get(f"/api/runs/{run_id}/tracks").json()
    TypeAdapter(Tracks).validate_python(body)
    return [t for t in body["tracks"] if "device_profile" in t]


def expected_slice_tracks(profile: str) -> dict[str, list[tuple[int, int]]]:
    """label -> (start_ts, end_ts) in time order, per engine row and DMA queue (one physical core here)."""
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in rows(profile, "Instruction"):
        out[r["timeline_track"]].append((r["start_ts"], r["end_ts"]))
    for r in rows(profile, "DmaPacket"):
        out[r["queue_name"]].append((r["start_ts"], r["end_ts"]))
    return {k: sorted(v) for k, v in out.items()}


def test_tracks_list_one_track_per_engine_row_and_dma_queue(served: tuple[TestClient, str, int]) -> None:
    client, run_id, _ = served
    tracks = device_tracks(client, run_id)
    run_ids = [t["track_id"] for t in client.get(f"/api/runs/{run_id}/tracks").json()["tracks"]
               if "device_profile" not in t]
    assert min(t["track_id"] for t in tracks) > max(run_ids)
    for profile in PROFILES:
        mine = [t for t in tracks if t["device_profile"] == profile]
        slices = {t["label"]: t["count"] for t in mine if t["kind"] == "slice"}
        assert slices == {k: len(v) for k, v in expected_slice_tracks(profile).items()}
        assert all(t["lane"] == "hardware" for t in mine)
        dma_groups = {t["label"]: t["group"] for t in mine if t["kind"] == "slice" and t["label"].startswith("q")}
        queue_type = {r["queue_name"]: r["queue_type"] for r in rows(profile, "DmaPacket")}
        assert dma_groups == {q: f"{profile} · NC:0 · DMA {queue_type[q]}" for q in queue_type}
        engines = [t["label"] for t in mine if t["group"].endswith("engines")]
        assert engines == [e for e in ("Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Sync")
                           if e in {r["timeline_track"] for r in rows(profile, "Instruction")}]


def full_window(client: TestClient, run_id: str, **query: str) -> dict[str, Any]:
    """A window so fine (a few ns per pixel) that every device slice is drawn on its own."""
    span = int(client.get(f"/api/runs/{run_id}").json()["summary"]["span_ns"])
    q = "&".join(f"{k}={v}" for k, v in query.items())
    body: dict[str, Any] = client.get(f"/api/runs/{run_id}/timeline?width_px=20000&end_ns={span}&{q}").json()
    TypeAdapter(TimelineWindow).validate_python(body)
    return body


def test_window_draws_every_device_slice_at_its_exact_time(served: tuple[TestClient, str, int]) -> None:
    client, run_id, origin = served
    body = full_window(client, run_id)
    by_id = {t["track_id"]: t for t in body["tracks"]}
    for t in device_tracks(client, run_id):
        if t["kind"] != "slice":
            continue
        got = by_id[t["track_id"]]["slices"]
        want = expected_slice_tracks(t["device_profile"])[t["label"]]
        assert len(got["ts"]) == len(want) and not by_id[t["track_id"]]["merged"]["ts"]
        assert sorted(zip(got["ts"], got["dur"], strict=True)) == [(s - origin, e - s) for s, e in want]


def test_device_counters_follow_their_tables(served: tuple[TestClient, str, int]) -> None:
    client, run_id, origin = served
    body = full_window(client, run_id)
    by_id = {t["track_id"]: t for t in body["tracks"]}
    checked: set[str] = set()
    for t in device_tracks(client, run_id):
        if t["kind"] != "counter":
            continue
        got = by_id[t["track_id"]]["counter"]
        p = t["device_profile"]
        if t["label"].startswith("HBM throughput"):
            want = [(r["timestamp"] - origin, r["current_throughput"]) for r in rows(p, "HbmUsage")]
        elif t["label"].startswith("DMA throughput"):
            want = [(r["timestamp"] - origin, r["current_throughput"]) for r in rows(p, "DmaUsage")]
        elif t["label"].startswith(("SBUF", "PSUM")):
            table = "SbufUsage" if t["label"].startswith("SBUF") else "PsumUsage"
            want = [(r["timestamp"] - origin, r["avg_util_percent"]) for r in rows(p, table)]
        elif t["label"] == "HFU per op [fraction of 1]":
            want = [(int(ts) - origin, v) for n in rows(p, "FrameworkNode")
                    for (a, b), h in zip(json.loads(n["time_intervals"]), json.loads(n["hfu_per_interval"]), strict=True)
                    for ts, v in ((a, float(h)), (b, 0.0))]
        elif t["label"] == "pending DMA":
            want = [(r["timestamp"] - origin, float(r["value"])) for r in rows(p, "PendingDma")]
        elif t["label"].startswith("throttling"):
            want = sorted([(r["timestamp"] - origin, float(1 - Fraction(r["k"], r["n"]))) for r in rows(p, "Throttle")]
                          + [(r["timestamp"] + r["duration"] - origin, 0.0) for r in rows(p, "Throttle")])
        else:
            raise AssertionError(f"a counter track the test does not know: {t['label']}")
        assert sorted(zip(got["ts"], got["value"], strict=True)) == sorted(want), t["label"]
        checked.add(t["label"])
    assert len(checked) == 7


def test_profile_filter_keeps_one_profiles_device_tracks(served: tuple[TestClient, str, int]) -> None:
    client, run_id, _ = served
    body = full_window(client, run_id, profile="matmul")
    profile_of = {t["track_id"]: t["device_profile"] for t in device_tracks(client, run_id)}
    drawn = {profile_of[t["track_id"]] for t in body["tracks"] if t["track_id"] in profile_of}
    assert drawn == {"matmul"}


def test_flows_are_the_flow_tables_dependencies(served: tuple[TestClient, str, int]) -> None:
    client, run_id, origin = served
    body = full_window(client, run_id)
    got = sorted((f["from_ts"], f["to_ts"]) for f in body["flows"] if f["kind"] == "dependency")
    want = []
    for p in PROFILES:
        start = {r["id"]: r["start_ts"] for r in rows(p, "Instruction")}
        want += [(start[f["in_id"]] - origin, start[f["out_id"]] - origin) for f in rows(p, "Flow")
                 if f["in_table"] == f["out_table"] == "Instruction"]
    assert got == sorted(want) and want


def instruction_slice(client: TestClient, run_id: str, origin: int, inst: dict[str, Any]) -> int:
    body = full_window(client, run_id)
    label = {t["track_id"]: (t["device_profile"], t["label"]) for t in device_tracks(client, run_id)}
    for t in body["tracks"]:
        if label.get(t["track_id"]) == ("rmsnorm_naive", inst["timeline_track"]):
            return int(t["slices"]["id"][t["slices"]["ts"].index(inst["start_ts"] - origin)])
    raise AssertionError("instruction not drawn")


def test_instruction_details_and_dependencies(served: tuple[TestClient, str, int]) -> None:
    client, run_id, origin = served
    insts = rows("rmsnorm_naive", "Instruction")
    flows = rows("rmsnorm_naive", "Flow")
    inst = next(r for r in insts if r["evt_wait_time_ns"] and any(f["out_id"] == r["id"] for f in flows))
    sid = instruction_slice(client, run_id, origin, inst)
    body = client.get(f"/api/runs/{run_id}/events/{sid}").json()
    TypeAdapter(EventDetail).validate_python(body)
    event = body["event"]
    assert (event["name"], event["ts_rel_ns"], event["dur_ns"]) == (inst["opcode"], inst["start_ts"] - origin,
                                                                    inst["end_ts"] - inst["start_ts"])
    # every non-null field; epoch-ns times as exact decimal text (a browser's JSON number would round them)
    assert event["args"] == {k: str(v) if isinstance(v, int) and v > 2**53 else v for k, v in inst.items()
                             if v is not None}
    assert event["args"]["start_ts"] == str(inst["start_ts"])
    assert event["device_profile"] == "rmsnorm_naive"
    start = {r["id"]: r["start_ts"] for r in insts}
    before = sorted(start[f["in_id"]] - origin for f in flows if f["out_id"] == inst["id"])
    after = sorted(start[f["out_id"]] - origin for f in flows if f["in_id"] == inst["id"])
    chain = body["chain"]
    assert [c["ts_rel_ns"] for c in chain if c["relation"] == "depends on"] == before
    assert [c["ts_rel_ns"] for c in chain if c["relation"] == "dependent"] == after
    assert [c["slice_id"] for c in chain if c["relation"] == "self"] == [sid]


def test_nc_exec_running_links_its_device_profile(served: tuple[TestClient, str, int]) -> None:
    client, run_id, origin = served
    system = pq.read_table(EXPORT / "system@latest" / "SystemProfileEvents.parquet").to_pylist()
    for p in PROFILES:
        meta = rows(p, "Metadata")[0]
        execs = [e for e in system if e["name"] == "nc_exec_running" and e["start_ts"] == meta["first_hw_timestamp"]]
        assert len(execs) == 1
        search = client.get(f"/api/runs/{run_id}/search?q=nc_exec_running").json()["matches"]
        [match] = [m for m in search if m["ts"] == meta["first_hw_timestamp"] - origin]
        body = client.get(f"/api/runs/{run_id}/events/{match['slice_id']}").json()
        TypeAdapter(EventDetail).validate_python(body)
        assert body["device_profile"]["profile_id"] == p
        assert (body["device_profile"]["start_ns"], body["device_profile"]["end_ns"]) == (
            meta["first_hw_timestamp"] - origin, meta["last_hw_timestamp"] - origin)


@pytest.mark.parametrize(("lo", "hi"), [(0, 1), (Fraction(1, 4), Fraction(3, 4)), (Fraction(1, 3), 1)])
def test_range_summary_is_the_published_definitions_over_the_window(served: tuple[TestClient, str, int],
                                                                    lo: Fraction, hi: Fraction) -> None:
    client, run_id, origin = served
    meta = rows("rmsnorm_naive", "Metadata")[0]
    first, last = meta["first_hw_timestamp"], meta["last_hw_timestamp"]
    t0, t1 = first + int((last - first) * lo), first + int((last - first) * hi)
    body = client.get(f"/api/runs/{run_id}/timeline/device-summary?start_ns={t0 - origin - 5}"
                      f"&end_ns={t1 - origin}").json()
    TypeAdapter(RangeDeviceSummaries).validate_python(body)
    [got] = [s for s in body["summaries"] if s["profile"] == "rmsnorm_naive"]
    t0 = max(t0 - 5, first)  # the range is cut to the profile's span
    assert (got["start_ns"], got["end_ns"]) == (t0 - origin, t1 - origin)
    # the reference reads engines by their timeline spelling and missing quantities as 0
    quantities = ("evt_wait_time_ns", "raw_flops", "flops_transpose", "hbm_read_bytes", "hbm_write_bytes",
                  "spill_reload_bytes")
    insts = [{**r, **{k: r.get(k) or 0 for k in quantities}, "engine": r["timeline_track"]}
             for r in rows("rmsnorm_naive", "Instruction")]
    tables = {"Instruction": pa.Table.from_pylist(insts), "DmaPacket": arrow("rmsnorm_naive", "DmaPacket"),
              "Metadata": arrow("rmsnorm_naive", "Metadata")}
    want = reference_summary(tables, t0, t1)
    for key in ("total_time", "vector_engine_instruction_count", "vector_engine_active_time_percent",
                "scalar_engine_instruction_count", "dma_active_time_percent", "dma_transfer_total_bytes",
                "hbm_read_bytes", "mbu_estimated_percent"):
        assert got["metrics"][key] == pytest.approx(want[key], rel=1e-12), key
    assert all(s["profile"] != "matmul" for s in body["summaries"])  # the range ends before matmul starts


def test_device_profile_alone_is_the_runs_timeline(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(EXPORT / "matmul@latest", arcname="matmul@latest")
    with TestClient(create_app(Settings(data_dir=tmp_path / "data"))) as client:
        r = client.post("/api/runs", files=[("files", ("matmul.tar.gz", buf.getvalue()))])
        run = wait_until_done(client, r.json()["id"])
        assert run["status"] == "ready", run
        meta = rows("matmul", "Metadata")[0]
        assert (run["summary"]["start_ns"], run["summary"]["span_ns"]) == (
            meta["first_hw_timestamp"], meta["last_hw_timestamp"] - meta["first_hw_timestamp"])
        body = full_window(client, run["id"])
        first = min(s for t in body["tracks"] if t["kind"] == "slice" for s in t["slices"]["ts"])
        assert first == min(r["start_ts"] for r in rows("matmul", "Instruction") + rows("matmul", "DmaPacket")) \
            - meta["first_hw_timestamp"]
        assert {t["label"] for t in device_tracks(client, run["id"]) if t["kind"] == "slice"} == set(
            expected_slice_tracks("matmul"))


def test_colour_by_pytorch_op_names_instructions_by_their_layer(served: tuple[TestClient, str, int]) -> None:
    client, run_id, origin = served
    body = full_window(client, run_id, device_color="layer")
    label = {t["track_id"]: (t["device_profile"], t["label"]) for t in device_tracks(client, run_id)}
    checked = 0
    for t in body["tracks"]:
        profile, row = label.get(t["track_id"], ("", ""))
        insts = sorted((r for r in rows(profile, "Instruction") if r["timeline_track"] == row),
                       key=lambda r: r["start_ts"]) if profile else []
        if not insts:
            continue
        got = sorted(zip(t["slices"]["ts"], (body["names"][c] for c in t["slices"]["name"]), strict=True))
        want = [(r["start_ts"] - origin, r["layer"] or (f"framework op {r['raw_framework_id']}"
                                                        if r["raw_framework_id"] is not None else r["opcode"]))
                for r in insts]
        assert got == sorted(want)
        checked += 1
    assert checked >= 8
