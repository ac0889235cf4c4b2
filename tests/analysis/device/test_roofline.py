"""Roofline points against the roofs computed here from Metadata and the rows: profile, window, framework
ops; compute- vs memory-bound and the distance to the roof, with hand cases at the ridge and the edges."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import pytest

from explorer.analysis.device.roofline import compute_roofline
from explorer.analysis.device.summary import DeviceSummary, compute_device_summary
from tests.helpers.device_tables import (
    BASE_NS,
    Inst,
    Peak,
    cut,
    matmul_profile,
    metadata,
    overlaps,
    profile,
    reference_summary,
    rmsnorm_profile,
    share,
    union_length,
)

B = BASE_NS
FLOPS_PER_NS = 2 * 128 * 128 * Fraction(1.4)   # Metadata of tests/helpers/device_tables.py
MAX_OPS = FLOPS_PER_NS * 10**9
BANDWIDTH = Fraction(6.4e11)


def expected_point(flops: int, hbm: int, time_ns: int) -> dict:
    intensity = Fraction(flops, hbm) if hbm else None
    attainable = MAX_OPS if intensity is None else min(MAX_OPS, intensity * BANDWIDTH)
    achieved = Fraction(flops * 10**9, time_ns) if time_ns else None
    return {"flops": flops, "hbm_bytes": hbm, "time_ns": time_ns,
            "intensity": None if intensity is None else float(intensity),
            "attainable_flops_per_s": float(attainable),
            "bound": "compute" if intensity is None or intensity >= MAX_OPS / BANDWIDTH else "memory",
            "distance_to_roof": float(attainable / achieved) if achieved else None,
            "mfu_inst_estimated_percent": None if achieved is None else float(achieved / MAX_OPS)}


def as_dict(point: Mapping[str, object]) -> dict:
    return {k: point[k] for k in ("flops", "hbm_bytes", "time_ns", "intensity", "attainable_flops_per_s",
                                           "bound", "distance_to_roof", "mfu_inst_estimated_percent")}


def test_roofs_come_from_metadata() -> None:
    roof = compute_roofline(rmsnorm_profile())
    assert roof["available"]
    assert roof["max_ops"] == float(MAX_OPS)
    assert roof["hbm_ddr_bandwidth"] == 6.4e11
    assert roof["peak_flops_bandwidth_ratio"] == float(MAX_OPS / BANDWIDTH)


def test_no_metadata_no_roofline() -> None:
    tables = rmsnorm_profile()
    del tables["Metadata"]
    roof = compute_roofline(tables)
    assert roof["available"] is False and roof["points"] == []
    assert roof["max_ops"] is roof["hbm_ddr_bandwidth"] is roof["peak_flops_bandwidth_ratio"] is None


@pytest.mark.parametrize("make, bound", [(rmsnorm_profile, "memory"), (matmul_profile, "compute")])
def test_profile_point_matches_its_summary(make, bound: str) -> None:  # type: ignore[no-untyped-def]
    tables = make()
    meta = tables["Metadata"].to_pylist()[0]
    t0, t1 = meta["first_hw_timestamp"], meta["last_hw_timestamp"]
    ref = reference_summary(tables, t0, t1)
    roof = compute_roofline(tables)
    assert roof["available"] and [p["kind"] for p in roof["points"] if p["kind"] != "layer"] == ["profile"]
    point = roof["points"][0]
    want = expected_point(int(ref["hardware_flops"]) - int(ref["transpose_flops"]),
                          int(ref["hbm_read_bytes"]) + int(ref["hbm_write_bytes"]), t1 - t0)
    assert as_dict(point) == want and point["bound"] == bound
    assert point["mfu_inst_estimated_percent"] == pytest.approx(
        compute_device_summary(tables).metrics["mfu_inst_estimated_percent"], rel=1e-12)


def _reference_layers(tables: dict, t0: int, t1: int, core: int | None) -> dict[str, dict]:
    rows = [r for r in tables["Instruction"].to_pylist() if overlaps(r["start_ts"], r["end_ts"], t0, t1)
            and (core is None or r["pcore_idx"] == core)]
    out = {}
    for layer in {r["layer"] for r in rows if r["layer"] is not None}:
        mine = [r for r in rows if r["layer"] == layer]
        flops = round(sum((share(r["raw_flops"] - r["flops_transpose"], r["start_ts"], r["end_ts"], t0, t1)
                           for r in mine), Fraction(0)))
        hbm = round(sum((share(r["hbm_read_bytes"], r["start_ts"], r["end_ts"], t0, t1) for r in mine), Fraction(0))) \
            + round(sum((share(r["hbm_write_bytes"], r["start_ts"], r["end_ts"], t0, t1) for r in mine), Fraction(0)))
        busy = union_length([cut(r["start_ts"] + r["evt_wait_time_ns"], r["end_ts"], t0, t1) for r in mine])
        out[layer] = expected_point(flops, hbm, busy)
    return out


@pytest.mark.parametrize("window", [None, (0, 9_000), (1_234, 20_001)])
@pytest.mark.parametrize("make", [rmsnorm_profile, matmul_profile])
def test_layer_points_match_the_rows(make, window: tuple[int, int] | None) -> None:  # type: ignore[no-untyped-def]
    tables = make()
    meta = tables["Metadata"].to_pylist()[0]
    t0, t1 = (meta["first_hw_timestamp"], meta["last_hw_timestamp"]) if window is None else (B + window[0],
                                                                                            B + window[1])
    roof = compute_roofline(tables, *(None, None) if window is None else (t0, t1))
    assert roof["available"]
    got = {p["label"]: as_dict(p) for p in roof["points"] if p["kind"] == "layer"}
    assert got == _reference_layers(tables, t0, t1, None)
    times = [p["time_ns"] for p in roof["points"] if p["kind"] == "layer"]
    assert times == sorted(times, reverse=True)
    if window is not None:
        (point,) = [p for p in roof["points"] if p["kind"] == "window"]
        ref = reference_summary(tables, t0, t1)
        assert as_dict(point) == expected_point(int(ref["hardware_flops"]) - int(ref["transpose_flops"]),
                                                int(ref["hbm_read_bytes"]) + int(ref["hbm_write_bytes"]), t1 - t0)


def test_window_point_on_one_core() -> None:
    tables = matmul_profile()
    roof = compute_roofline(tables, B, B + 5_000, core=1)
    assert roof["available"]
    (point,) = [p for p in roof["points"] if p["kind"] == "window"]
    ref = reference_summary(tables, B, B + 5_000, core=1)
    assert point["flops"] == int(ref["hardware_flops"]) - int(ref["transpose_flops"])
    assert {p["label"]: p["flops"] for p in roof["points"] if p["kind"] == "layer"} == {
        k: v["flops"] for k, v in _reference_layers(tables, B, B + 5_000, 1).items()}


def test_hand_points_at_the_ridge_and_edges() -> None:
    # a 1.5 GHz clock: 2 x 128 x 128 x 1.5 = 49,152 FLOP/ns against 640 B/ns, the ridge at 76.8 FLOP/byte
    hbm, at_ridge = 10_000, 768_000
    tables = profile(1_000, [
        Inst(0, 100, "TensorMatrix", flops=at_ridge, hbm_read=hbm, layer="at_ridge"),
        Inst(100, 100, "TensorMatrix", flops=at_ridge - 1, hbm_read=hbm, layer="below"),
        Inst(200, 100, "TensorMatrix", flops=5_000, layer="no_bytes"),
        Inst(300, 100, "Vector", hbm_read=64, layer="no_flops"),
    ], Metadata=metadata(1_000, Peak(clock_ghz=1.5)))
    roof = compute_roofline(tables)
    assert roof["available"] and roof["peak_flops_bandwidth_ratio"] == 76.8
    points = {p["label"]: p for p in roof["points"]}
    assert points["at_ridge"]["bound"] == "compute" and points["below"]["bound"] == "memory"
    assert points["at_ridge"]["attainable_flops_per_s"] == 49_152 * 10**9
    assert points["below"]["attainable_flops_per_s"] == (at_ridge - 1) * 640 * 10**9 // hbm
    # achieved: 768,000 FLOPs in 100 ns = 7,680 FLOP/ns, the roof is 49,152 FLOP/ns: 6.4 times higher
    assert points["at_ridge"]["distance_to_roof"] == 49_152 / 7_680
    assert points["no_bytes"]["intensity"] is None and points["no_bytes"]["bound"] == "compute"
    assert points["no_bytes"]["attainable_flops_per_s"] == 49_152 * 10**9
    assert points["at_ridge"]["mfu_inst_estimated_percent"] == 7_680 / 49_152
    assert points["no_flops"]["distance_to_roof"] is None and points["no_flops"]["bound"] == "memory"


def test_framework_id_groups_when_the_export_has_no_layer_column() -> None:
    tables = rmsnorm_profile()
    tables["Instruction"] = tables["Instruction"].drop_columns(["layer"])
    roof = compute_roofline(tables)
    assert roof["available"]
    ids = {str(sum(map(ord, name))) for name in ("aten::mul", "aten::pow", "aten::mean", "aten::rsqrt",
                                                  "aten::arange")}
    assert {p["label"] for p in roof["points"] if p["kind"] == "layer"} == ids


def test_a_profile_summary_at_hand_is_used_for_the_profile_point() -> None:
    tables = matmul_profile()
    whole = compute_device_summary(tables)
    given = compute_roofline(tables, B, B + 3_000, profile=whole)
    assert given == compute_roofline(tables, B, B + 3_000)
    halved = DeviceSummary(whole.start_ns, whole.end_ns, None, {**whole.metrics, "total_time": whole.metrics[
        "total_time"] * 2}, frozenset())
    slow = compute_roofline(tables, profile=halved)
    assert slow["available"] and given["available"]
    assert slow["points"][0]["time_ns"] == 2 * given["points"][0]["time_ns"]
