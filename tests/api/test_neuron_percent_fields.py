"""Every `*_percent` field of the Neuron tables the explorer reads (other than the Summary's, tested with the device
page) on the scale ../shared/neuron/PROFILE_SCHEMA.md publishes, against its definition recomputed here from the
fixture's rows (pyarrow + Fraction, no explorer code): fields the schema defines as a ratio (FrameworkNode `hfu`
and `hfu_per_interval`: the node's hardware FLOPs over max_ops x its span, as `hfu_estimated_percent`; OpcodeSummary
`active_time_percent`; the throttling table's shares, ThrottleSummary's fields) are fractions of 1 and shown x100 as
% (the `ratio` filter); fields it gives only the unit `percent` without a definition (CpuUsage `util_percent`,
HostMemUsage `used_percent`, SbufUsage / PsumUsage `avg_util_percent`) are drawn as written on tracks labelled %."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction
from html import unescape
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from explorer.config import Settings
from explorer.runs.ingest import ingest_paths
from tests.helpers.neuron_shifted import EXPORT, rows_of

PROFILES = ("matmul", "rmsnorm_naive")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str]]:
    root = tmp_path_factory.mktemp("percent_fields")
    app = create_app(Settings(data_dir=root / "data"))
    run = ingest_paths(app.state.explorer.store, [EXPORT], "percent fields").id
    with TestClient(app) as client:
        yield client, run


def _fraction(value: Any) -> Fraction:
    return Fraction(Decimal(repr(float(value))))


def _max_ops(profile: str) -> Fraction:
    """FLOP/s: 2 x rows x cols x the Tensor engine's clock (GHz), from Metadata (PROFILE_SCHEMA.md, Summary metrics)."""
    meta = rows_of(EXPORT / f"{profile}@latest", "Metadata")[0]
    return (2 * meta["tensor_engine_num_rows"] * meta["tensor_engine_num_cols"]
            * Fraction(Decimal(str(meta["tensor_engine_clock_freq"]))) * 10**9)


def _cells(html: str, panel: str) -> list[list[str]]:
    """The text of each body row's cells in the panel with that id."""
    part = html.split(f'id="{panel}"', 1)[1].split("</tbody>", 1)[0].split("<tbody>", 1)[1]
    return [[unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", part, re.S)]


def _shown(fraction: float) -> str:
    return f"{100 * fraction:.1f} %"


@pytest.mark.parametrize("profile", PROFILES)
def test_framework_node_hfu_is_a_fraction_by_its_definition(served: tuple[TestClient, str], profile: str) -> None:
    """hfu = the node's hardware FLOPs (its instructions' raw_flops, `layer` = node) / (max_ops x its span)."""
    client, run = served
    insts = rows_of(EXPORT / f"{profile}@latest", "Instruction")
    nodes = rows_of(EXPORT / f"{profile}@latest", "FrameworkNode")
    view = client.get(f"/api/runs/{run}/device/{profile}").json()
    api = {n["node_name"]: n["hfu"] for n in view["hierarchy"]}
    page = client.get(f"/runs/{run}/device/{profile}").text
    shown = {cells[0]: cells[3] for cells in _cells(page, "hierarchy")}
    layers = {cells[0]: cells[2] for cells in _cells(page, "layers")}
    for n in nodes:
        flops = sum(i.get("raw_flops") or 0 for i in insts if i["layer"] == n["node_name"])
        want = Fraction(flops) / (_max_ops(profile) * Fraction(n["end_ts"] - n["start_ts"], 10**9))
        assert 0 <= want <= 1 and abs(_fraction(n["hfu"]) - want) < Fraction(1, 10**9), n["node_name"]
        assert api[n["node_name"]] == n["hfu"]  # as published
        assert shown[n["node_name"]] == _shown(float(want)) == layers[n["node_name"]]


@pytest.mark.parametrize("profile", PROFILES)
def test_per_op_hfu_track_is_drawn_as_a_fraction(served: tuple[TestClient, str], profile: str) -> None:
    """hfu_per_interval: the node's HFU over each of its time_intervals (one interval here: its hfu)."""
    client, run = served
    nodes = rows_of(EXPORT / f"{profile}@latest", "FrameworkNode")
    tracks = client.get(f"/api/runs/{run}/tracks").json()["tracks"]
    [track] = [t for t in tracks if t.get("device_profile") == profile and t["label"].startswith("HFU per op")]
    assert track["label"] == "HFU per op [fraction of 1]"
    span = client.get(f"/api/runs/{run}").json()["summary"]["span_ns"]
    w = client.get(f"/api/runs/{run}/timeline", params={"start_ns": 0, "end_ns": span, "width_px": 20000,
                                                         "tracks": str(track["track_id"])}).json()
    drawn = next(t for t in w["tracks"] if t["track_id"] == track["track_id"])["counter"]["value"]
    want = []
    for n in nodes:
        per = json.loads(n["hfu_per_interval"])
        assert len(per) == len(json.loads(n["time_intervals"])) == 1 and per[0] == n["hfu"]
        want += [float(per[0]), 0.0]
    assert sorted(drawn) == sorted(want) and max(drawn) <= 1


@pytest.mark.parametrize("profile", PROFILES)
def test_opcode_active_time_percent(served: tuple[TestClient, str], profile: str) -> None:
    """OpcodeSummary.active_time_percent: the opcode's active time (union of its instructions' intervals after
    their semaphore wait) over T, like `<engine>_engine_active_time_percent`; the file's value and the page's."""
    client, run = served
    meta = rows_of(EXPORT / f"{profile}@latest", "Metadata")[0]
    t_ns = meta["last_hw_timestamp"] - meta["first_hw_timestamp"]
    insts = rows_of(EXPORT / f"{profile}@latest", "Instruction")
    published = {(r["engine"].lower(), r["opcode"]): r["active_time_percent"]
                 for r in rows_of(EXPORT / f"{profile}@latest", "OpcodeSummary")}
    page = {(c[0], c[1]): c[5] for c in _cells(client.get(f"/runs/{run}/device/{profile}").text, "opcodes")}
    for row in client.get(f"/api/runs/{run}/device/{profile}").json()["opcodes"]:
        mine = sorted((i["start_ts"] + min(i.get("evt_wait_time_ns") or 0, i["end_ts"] - i["start_ts"]), i["end_ts"])
                      for i in insts if i["engine"].lower() == row["engine"] and i["opcode"] == row["opcode"])
        union, reach = 0, None
        for a, b in mine:
            a = a if reach is None else max(a, reach)
            union += max(0, b - a)
            reach = b if reach is None else max(reach, b)
        want = Fraction(union, t_ns)
        assert row["active_time_ns"] == union and row["active_time_percent"] == float(want)
        if not any(i.get("evt_wait_time_ns") for i in insts if i["engine"].lower() == row["engine"]
                   and i["opcode"] == row["opcode"]):  # the fixture writer reads a wait as lying before start_ts
            assert abs(_fraction(published[(row["engine"], row["opcode"])]) - want) < Fraction(1, 10**9)
        assert page[(row["engine"], row["opcode"])] == _shown(float(want))


def test_throttle_shares(served: tuple[TestClient, str]) -> None:
    """ThrottleSummary's fields as the page recomputes them from Throttle rows: throttle_active_time_percent =
    time with k < n over T, max_achievable_util_with_throttling_percent = 1 - (time-weighted 1 - k/n) / T."""
    client, run = served
    for profile in PROFILES:
        meta = rows_of(EXPORT / f"{profile}@latest", "Metadata")[0]
        lo, hi = meta["first_hw_timestamp"], meta["last_hw_timestamp"]
        rows = [r for r in rows_of(EXPORT / f"{profile}@latest", "Throttle") if r["k"] < r["n"]]
        got = client.get(f"/api/runs/{run}/device/{profile}").json()["throttle"]
        page = _cells(client.get(f"/runs/{run}/device/{profile}").text, "throttle")
        for g, cells in zip(got, page, strict=True):
            mine = [r for r in rows if r["type"] == g["throttle_type"]]
            spans = [(max(lo, r["timestamp"]), min(hi, r["timestamp"] + r["duration"])) for r in mine]
            active = sum(max(0, b - a) for a, b in spans)  # rows of one core and type do not overlap
            lost = sum((Fraction(r["n"] - r["k"], r["n"]) * max(0, b - a) for r, (a, b) in zip(mine, spans, strict=True)),
                       Fraction(0))
            assert g["throttle_active_time_percent"] == float(Fraction(active, hi - lo))
            assert g["max_achievable_util_with_throttling_percent"] == float(1 - lost / (hi - lo))
            assert cells[3:5] == [_shown(float(Fraction(active, hi - lo))), _shown(float(1 - lost / (hi - lo)))]


@pytest.mark.parametrize(("table", "column", "label"), [
    ("CpuUsage", "util_percent", "CPU"), ("HostMemUsage", "used_percent", "host memory [%]"),
    ("SbufUsage", "avg_util_percent", "SBUF utilisation [%]"), ("PsumUsage", "avg_util_percent", "PSUM utilisation [%]"),
])
def test_percent_unit_fields_without_a_definition_drawn_as_written(served: tuple[TestClient, str], table: str,
                                                                    column: str, label: str) -> None:
    """The schema gives these the unit `percent` and no definition: drawn as the file writes them (no rescaling)
    on tracks whose label says %."""
    client, run = served
    folders = ["system"] if table in ("CpuUsage", "HostMemUsage") else list(PROFILES)
    want = sorted(float(r[column]) for f in folders for r in rows_of(EXPORT / f"{f}@latest", table))
    tracks = [t for t in client.get(f"/api/runs/{run}/tracks").json()["tracks"]
              if t["kind"] == "counter" and t["label"].startswith(label) and "%" in t["label"]]
    assert tracks
    span = client.get(f"/api/runs/{run}").json()["summary"]["span_ns"]
    ids = ",".join(str(t["track_id"]) for t in tracks)
    w = client.get(f"/api/runs/{run}/timeline", params={"start_ns": 0, "end_ns": span, "width_px": 20000,
                                                         "tracks": ids}).json()
    drawn = sorted(v for t in w["tracks"] if t["track_id"] in {x["track_id"] for x in tracks} for v in t["counter"]["value"])
    assert drawn == pytest.approx(want, rel=1e-6)  # float32 columns: as written, to their precision
