"""The device-profile API over the Neuron export fixture (tests/fixtures/neuron/device_export): every number
is checked against the fixture's Parquet rows, read here with pyarrow and summed in plain Python
(tests/helpers/device_tables.py's reference of the published definitions, Fractions for shares); query times are
relative ns from the run's origin."""

from __future__ import annotations

import csv
import io
import shutil
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
from explorer.model.device_shapes import DeviceView
from explorer.runs.ingest import ingest_paths
from tests.helpers.device_tables import ENGINE_OF, overlaps, reference_summary, share, union_length

EXPORT = Path(__file__).resolve().parents[2] / "fixtures" / "neuron" / "device_export"
PROFILES = ("rmsnorm_naive", "matmul")
HOSTILE = "<script>alert(1)</script>"
FORMULA = "=HYPERLINK(\"http://x\")"


def fixture_tables(profile: str, root: Path = EXPORT) -> dict[str, pa.Table]:
    """The export's tables of one profile, split parts concatenated in part order."""
    folder = root / f"{profile}@latest"
    out: dict[str, list[pa.Table]] = {}
    for path in sorted(folder.glob("*.parquet")):
        stem = path.stem
        name = stem.rsplit("_", 1)[0] if stem.rsplit("_", 1)[-1].isdigit() else stem
        out.setdefault(name, []).append(pq.read_table(path))
    return {k: pa.concat_tables(v) for k, v in out.items()}


ENGINE_NAME = {k.lower(): k for k in ENGINE_OF}  # the reference reads the schema's spelling (TensorMatrix)
ZERO_WHEN_NULL = ("evt_wait_time_ns", "hbm_read_bytes", "hbm_write_bytes", "raw_flops", "flops_transpose",
                  "spill_reload_bytes", "transfer_bytes")


def reference_tables(profile: str) -> dict[str, pa.Table]:
    """The fixture's tables as the reference reads them: engines in the schema's spelling, a null (or
    absent) byte, FLOP or wait column as 0, as the published definitions count them."""
    tables = fixture_tables(profile)
    for name in ("Instruction", "DmaPacket"):
        rows = tables[name].to_pylist()
        for r in rows:
            if "engine" in r:
                r["engine"] = ENGINE_NAME[r["engine"].lower()]
            for col in ZERO_WHEN_NULL:
                if r.get(col) is None:
                    r[col] = 0
        tables[name] = pa.Table.from_pylist(rows)
    return tables


def first(tables: dict[str, pa.Table], name: str) -> dict[str, Any]:
    row: dict[str, Any] = tables[name].to_pylist()[0]
    return row


def hostile_export(tmp: Path) -> Path:
    """The fixture with a matmul whose opcodes are spreadsheet formulas and whose layers are markup."""
    root = tmp / "hostile_export"
    shutil.copytree(EXPORT, root)
    path = root / "matmul@latest" / "Instruction.parquet"
    rows = pq.read_table(path)
    n = rows.num_rows
    rows = rows.set_column(rows.column_names.index("opcode"), "opcode", pa.array([FORMULA] * n))
    rows = rows.set_column(rows.column_names.index("layer"), "layer", pa.array([HOSTILE] * n))
    pq.write_table(rows, path)
    return root


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str, str, int]]:
    tmp = tmp_path_factory.mktemp("device_api")
    app = create_app(Settings(data_dir=tmp / "data"))
    store = app.state.explorer.store
    run = ingest_paths(store, [EXPORT], "device").id
    hostile = ingest_paths(store, [hostile_export(tmp)], "hostile").id
    with TestClient(app) as client:
        origin = client.get(f"/api/runs/{run}/device/profiles").json()["origin_ns"]
        yield client, run, hostile, origin


def test_profiles_are_listed_with_relative_spans(served: tuple[TestClient, str, str, int]) -> None:
    client, run, _, origin = served
    body = client.get(f"/api/runs/{run}/device/profiles").json()
    listed = pq.read_table(EXPORT / "system@latest" / "DeviceProfileList.parquet").to_pylist()
    by_name = {p["profile_id"]: p for p in body["profiles"]}
    assert set(by_name) == {r["device_profile_name"] for r in listed} == set(PROFILES)
    for r in listed:
        p = by_name[r["device_profile_name"]]
        meta = first(fixture_tables(r["device_profile_name"]), "Metadata")
        assert (p["start_ns"] + origin, p["end_ns"] + origin) == (meta["first_hw_timestamp"], meta["last_hw_timestamp"])
        assert (p["model_id"], p["nc_id"], p["process_id"]) == (r["model_id"], r["nc_id"], r["process_id"])
        assert client.get(p["links"]["page"]).status_code == 200


@pytest.mark.parametrize("profile", PROFILES)
def test_whole_profile_summary_is_the_exports_row(served: tuple[TestClient, str, str, int], profile: str) -> None:
    client, run, _, origin = served
    body = client.get(f"/api/runs/{run}/device/summary?profile={profile}").json()
    row = {k: v for k, v in first(fixture_tables(profile), "Summary").items() if v is not None}
    assert {k: body["metrics"][k] for k in row} == row
    assert set(body["from_export"]) == set(row)
    meta = first(fixture_tables(profile), "Metadata")
    assert (body["start_ns"], body["end_ns"]) == (meta["first_hw_timestamp"] - origin, meta["last_hw_timestamp"] - origin)


WINDOWS = [(0.25, 0.5), (0.1, 0.9), (0.0, 1.0), (0.6, 0.6001)]  # fractions of the profile's span


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("where", WINDOWS)
def test_window_summary_matches_the_rows(served: tuple[TestClient, str, str, int], profile: str,
                                         where: tuple[float, float]) -> None:
    client, run, _, origin = served
    tables = reference_tables(profile)
    meta = first(tables, "Metadata")
    lo, hi = meta["first_hw_timestamp"], meta["last_hw_timestamp"]
    t0 = lo + int((hi - lo) * Fraction(where[0]))
    t1 = lo + int((hi - lo) * Fraction(where[1]))
    body = client.get(f"/api/runs/{run}/device/summary?profile={profile}&start_ns={t0 - origin}"
                      f"&end_ns={t1 - origin}").json()
    assert (body["start_ns"], body["end_ns"]) == (t0 - origin, t1 - origin)
    assert body["from_export"] == []
    expected = reference_summary(tables, t0, t1)
    for key, value in expected.items():
        assert body["metrics"][key] == pytest.approx(value, rel=1e-12), key
        if isinstance(value, int):
            assert isinstance(body["metrics"][key], int), key


def test_recommendations_carry_the_number_that_fired(served: tuple[TestClient, str, str, int]) -> None:
    client, run, _, _ = served
    packets = fixture_tables("rmsnorm_naive")["DmaPacket"].column("transfer_bytes").to_pylist()
    average = sum(packets) / len(packets)
    assert average < 32 * 1024  # the fixture's naive kernel moves small tiles
    body = client.get(f"/api/runs/{run}/device/summary?profile=rmsnorm_naive").json()
    fired = {r["key"]: r for r in body["recommendations"]}
    assert fired["dma_average_transfer"]["value"] == average
    assert fired["dma_average_transfer"]["threshold"] == 32 * 1024
    assert fired["dma_average_transfer"]["unit"] == "bytes"


@pytest.mark.parametrize("path", ["/api/runs/{run}/device/nope", "/api/runs/{run}/device/summary",
                                  "/api/runs/{run}/device/summary?profile=nope", "/api/runs/{run}/device/nope/roofline",
                                  "/api/runs/{run}/device/nope/instructions.csv", "/runs/{run}/device/nope",
                                  "/api/device/compare?a={run}:nope&b={run}:matmul"])
def test_unknown_profiles_are_404(served: tuple[TestClient, str, str, int], path: str) -> None:
    client, run, _, _ = served
    resp = client.get(path.format(run=run))
    assert resp.status_code == 404
    assert resp.json()["error"]["code"] == "device_profile_not_found"


def test_unknown_run_and_bad_refs(served: tuple[TestClient, str, str, int]) -> None:
    client, run, _, _ = served
    assert client.get("/api/runs/nope/device/profiles").status_code == 404
    assert client.get(f"/api/device/compare?a={run}&b={run}:matmul").status_code == 400
    assert client.get(f"/api/runs/{run}/device/summary?profile=matmul&start_ns=9&end_ns=3").status_code == 400


def expected_point(flops: int, hbm: int, time_ns: int, meta: dict[str, Any]) -> dict[str, Any]:
    max_ops = 2 * meta["tensor_engine_num_rows"] * meta["tensor_engine_num_cols"] * Fraction(
        meta["tensor_engine_clock_freq"]) * 10**9
    bandwidth = Fraction(meta["hbm_ddr_bandwidth"])
    intensity = Fraction(flops, hbm)
    achieved = Fraction(flops * 10**9, time_ns)
    attainable = min(max_ops, intensity * bandwidth)
    return {"flops": flops, "hbm_bytes": hbm, "time_ns": time_ns, "intensity": float(intensity),
            "bound": "compute" if intensity >= max_ops / bandwidth else "memory",
            "achieved_flops_per_s": float(achieved), "distance_to_roof": float(attainable / achieved)}


@pytest.mark.parametrize(("profile", "bound"), [("rmsnorm_naive", "memory"), ("matmul", "compute")])
def test_roofline_profile_and_window_points(served: tuple[TestClient, str, str, int], profile: str,
                                            bound: str) -> None:
    client, run, _, origin = served
    tables = reference_tables(profile)
    meta, summary = first(tables, "Metadata"), first(tables, "Summary")
    lo, hi = meta["first_hw_timestamp"], meta["last_hw_timestamp"]
    t0, t1 = lo + (hi - lo) // 4, lo + (hi - lo) // 2
    body = client.get(f"/api/runs/{run}/device/{profile}/roofline?start_ns={t0 - origin}&end_ns={t1 - origin}").json()
    points = {p["kind"]: p for p in body["points"] if p["kind"] != "layer"}
    whole = expected_point(summary["hardware_flops"] - summary["transpose_flops"],
                           summary["hbm_read_bytes"] + summary["hbm_write_bytes"], hi - lo, meta)
    assert whole["bound"] == bound
    insts = [r for r in tables["Instruction"].to_pylist() if overlaps(r["start_ts"], r["end_ts"], t0, t1)]

    def total(col: str) -> int:
        return round(sum((share(r[col], r["start_ts"], r["end_ts"], t0, t1) for r in insts), Fraction(0)))

    window = expected_point(total("raw_flops") - total("flops_transpose"),
                            total("hbm_read_bytes") + total("hbm_write_bytes"), t1 - t0, meta)
    for kind, want in (("profile", whole), ("window", window)):
        got = points[kind]
        for key, value in want.items():
            assert got[key] == (value if isinstance(value, str) else pytest.approx(value, rel=1e-12)), (kind, key)
    assert body["peak_flops_bandwidth_ratio"] == pytest.approx(
        2 * 128 * 128 * meta["tensor_engine_clock_freq"] * 1e9 / meta["hbm_ddr_bandwidth"], rel=1e-12)


def test_device_view_sections_match_the_rows(served: tuple[TestClient, str, str, int]) -> None:
    client, run, _, origin = served
    tables = reference_tables("matmul")
    body = client.get(f"/api/runs/{run}/device/matmul").json()
    TypeAdapter(DeviceView).validate_python(body)
    insts = tables["Instruction"].to_pylist()
    expected: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for r in insts:
        wait = min(r["evt_wait_time_ns"], r["duration_ns"])
        expected.setdefault((ENGINE_OF[r["engine"]], r["opcode"]), []).append((r["start_ts"] + wait, r["end_ts"]))
    got = {(o["engine"], o["opcode"]): (o["instruction_count"], o["active_time_ns"]) for o in body["opcodes"]}
    assert got == {k: (len(v), union_length(v)) for k, v in expected.items()}
    per_engine = {e["engine"]: e["instruction_count"] for e in body["engines"]}
    assert per_engine == {e: sum(ENGINE_OF[r["engine"]] == e for r in insts)
                          for e in ("tensor", "vector", "scalar", "gpsimd", "sync")}
    tensors = tables["TensorInfo"].to_pylist()
    assert [t["variable_name"] for t in body["tensors"]] == [
        t["variable_name"] for t in sorted(tensors, key=lambda t: -t["load_to_sbuf_total_size_bytes"])]
    assert {t["variable_name"]: t["sbuf_reload_factor"] for t in body["tensors"]} == {
        t["variable_name"]: t["load_to_sbuf_repeat_factor"] for t in tensors}
    assert sorted((a["start_ns"] + origin, a["end_ns"] + origin, a["start_address"]) for a in body["sbuf"]) == sorted(
        (a["start_ts"], a["end_ts"], a["start_address"]) for a in tables["SbufAllocation"].to_pylist())
    nodes = {n["node_name"]: n for n in body["hierarchy"]}
    for node in tables["FrameworkNode"].to_pylist():
        mine = [r for r in insts if r["layer"] == node["node_name"]]
        assert nodes[node["node_name"]]["instruction_count"] == len(mine)
        assert nodes[node["node_name"]]["time_ns"] == node["end_ts"] - node["start_ts"]  # one interval each
    throttles = tables["Throttle"].to_pylist()
    assert [(t["pcore_idx"], t["throttle_type"], t["max_throttling"]) for t in body["throttle"]] == [
        (r["pcore_idx"], r["type"], (r["n"] - r["k"]) / r["n"]) for r in throttles if r["k"] < r["n"]]


def read_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.mark.parametrize(("kind", "table", "track"), [("instructions", "Instruction", "timeline_track"),
                                                      ("dma", "DmaPacket", "queue_name")])
def test_csv_holds_the_rows_of_the_range(served: tuple[TestClient, str, str, int], kind: str, table: str,
                                         track: str) -> None:
    client, run, _, origin = served
    rows = fixture_tables("rmsnorm_naive")[table].to_pylist()
    meta = first(fixture_tables("rmsnorm_naive"), "Metadata")
    lo, hi = meta["first_hw_timestamp"], meta["last_hw_timestamp"]
    t0, t1 = lo + (hi - lo) // 3, lo + 2 * (hi - lo) // 3
    tracks = sorted({r[track] for r in rows})[:2]
    resp = client.get(f"/api/runs/{run}/device/rmsnorm_naive/{kind}.csv?start_ns={t0 - origin}&end_ns={t1 - origin}"
                      f"&tracks={','.join(tracks)}")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/csv")
    got = read_csv(resp.text)
    want = [r for r in rows if overlaps(r["start_ts"], r["end_ts"], t0, t1) and r[track] in tracks]
    assert want and sorted((g["timeline_track"], int(g["start_ts"]), int(g["end_ts"])) for g in got) == sorted(
        (r[track], r["start_ts"], r["end_ts"]) for r in want)
    assert list(got[0])[0] == "timeline_track"
    everything = read_csv(client.get(f"/api/runs/{run}/device/rmsnorm_naive/{kind}.csv").text)
    assert len(everything) == len(rows)


def test_csv_cells_cannot_run_as_formulas(served: tuple[TestClient, str, str, int]) -> None:
    client, _, hostile, _ = served
    got = read_csv(client.get(f"/api/runs/{hostile}/device/matmul/instructions.csv").text)
    assert got and {g["opcode"] for g in got} == {"'" + FORMULA}
    assert {g["layer"] for g in got} == {HOSTILE}  # not a formula: kept as is (CSV is not HTML)


def test_hostile_names_are_escaped_on_the_device_page(served: tuple[TestClient, str, str, int]) -> None:
    client, _, hostile, _ = served
    html = client.get(f"/runs/{hostile}/device/matmul").text
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_compare_deltas(served: tuple[TestClient, str, str, int]) -> None:
    client, run, _, _ = served
    body = client.get(f"/api/device/compare?a={run}:rmsnorm_naive&b={run}:matmul").json()
    a, b = first(fixture_tables("rmsnorm_naive"), "Summary"), first(fixture_tables("matmul"), "Summary")
    metrics = {m["name"]: m for m in body["metrics"]}
    for key in (k for k in a if a[k] is not None and b[k] is not None):
        assert (metrics[key]["a"], metrics[key]["b"]) == (a[key], b[key])
        assert metrics[key]["delta"] == pytest.approx(b[key] - a[key], rel=1e-12, abs=1e-15)
    engines = {e["name"]: e for e in body["engines"]}
    key = "tensor_engine_active_time_percent"
    assert engines[key]["delta"] == pytest.approx(b[key] - a[key])
    ops = {(o["engine"], o["opcode"]): o for o in body["opcodes"]}
    for name, side in (("rmsnorm_naive", "a"), ("matmul", "b")):
        per_op: dict[tuple[str, str], int] = {}
        for r in reference_tables(name)["Instruction"].to_pylist():
            per_op[(ENGINE_OF[r["engine"]], r["opcode"])] = per_op.get((ENGINE_OF[r["engine"]], r["opcode"]), 0) + 1
        for op, row in ops.items():
            assert row[f"{side}_count"] == per_op.get(op, 0)
    assert all(o["delta_active_time_ns"] == o["b_active_time_ns"] - o["a_active_time_ns"] for o in ops.values())


def test_device_view_with_a_window(served: tuple[TestClient, str, str, int]) -> None:
    """A window adds its Summary (the rows' reference, as the summary route) and its roofline point."""
    client, run, _, origin = served
    tables = reference_tables("matmul")
    meta = first(tables, "Metadata")
    t0, t1 = meta["first_hw_timestamp"] + 1000, meta["first_hw_timestamp"] + 9000
    query = f"start_ns={t0 - origin}&end_ns={t1 - origin}"
    body = client.get(f"/api/runs/{run}/device/matmul?{query}").json()
    assert body["window"] == client.get(f"/api/runs/{run}/device/summary?profile=matmul&{query}").json()
    expected = reference_summary(tables, t0, t1)
    assert body["window"]["metrics"]["hardware_flops"] == expected["hardware_flops"]
    assert [p["kind"] for p in body["roofline"]["points"]][:2] == ["profile", "window"]
    assert client.get(f"/api/runs/{run}/device/matmul").json()["window"] is None


def test_a_lone_profile_is_the_default(tmp_path: Path) -> None:
    """A device profile without a system profile is a run of its own; its summary needs no profile=."""
    app = create_app(Settings(data_dir=tmp_path / "data"))
    run = ingest_paths(app.state.explorer.store, [EXPORT / "matmul@latest"], "lone").id
    with TestClient(app) as client:
        listed = client.get(f"/api/runs/{run}/device/profiles").json()["profiles"]
        assert [p["system_slice_id"] for p in listed] == [-1]
        body = client.get(f"/api/runs/{run}/device/summary").json()
        row = {k: v for k, v in first(fixture_tables("matmul"), "Summary").items() if v is not None}
        assert body["profile"] == listed[0]["profile_id"]
        assert {k: body["metrics"][k] for k in row} == row


# The fixture writer counts a vector instruction's 120 ns semaphore wait as active (it reads the wait as lying
# before start_ts); the explorer cuts it from the interval (the Summary's definition): these differ by 120 ns / T.
WAIT_READING = {"rmsnorm_naive": ("vector_engine_active_time_percent", "total_active_time_percent")}


@pytest.mark.parametrize("profile", PROFILES)
def test_window_over_the_whole_profile_recomputes_the_exports_summary(served: tuple[TestClient, str, str, int],
                                                                      profile: str) -> None:
    """The Summary's `*_percent` fields are fractions of 1 (as published exports write them): a window over the
    whole span, recomputed from raw rows, gives the file's own values on that scale."""
    client, run, _, origin = served
    tables = fixture_tables(profile)
    meta, row = first(tables, "Metadata"), first(tables, "Summary")
    assert row["total_active_time_percent"] == pytest.approx(row["total_active_time"] / row["total_time"], rel=1e-12)
    query = f"start_ns={meta['first_hw_timestamp'] - origin}&end_ns={meta['last_hw_timestamp'] - origin}"
    body = client.get(f"/api/runs/{run}/device/summary?profile={profile}&{query}").json()
    assert body["from_export"] == []
    shares = {k: v for k, v in row.items() if k.endswith("_percent") and v is not None}
    assert "total_active_time_percent" in shares and "mbu_estimated_percent" in shares
    for key, value in shares.items():
        if key in WAIT_READING.get(profile, ()):
            assert body["metrics"][key] == pytest.approx(value, abs=0.01), key
        else:
            assert body["metrics"][key] == pytest.approx(value, rel=1e-9), key
        assert 0 <= body["metrics"][key] <= 1, key


@pytest.mark.parametrize("profile", PROFILES)
def test_cards_show_the_files_fractions_as_percent(served: tuple[TestClient, str, str, int], profile: str) -> None:
    client, run, _, _ = served
    html = client.get(f"/runs/{run}/device/{profile}").text
    row = first(fixture_tables(profile), "Summary")
    assert f"{100 * row['total_active_time_percent']:.1f} % active" in html
    for key in ("hfu_estimated_percent", "mbu_estimated_percent", "dma_active_time_percent"):
        assert f'data-metric="{key}"><div class="k">' in html
        card = html.split(f'data-metric="{key}"><div class="k">', 1)[1]
        assert card.split('<div class="v">', 1)[1].startswith(f"{100 * row[key]:.1f} %</div>"), key
