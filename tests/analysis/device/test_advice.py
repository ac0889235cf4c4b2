"""The recommendation rules fire just past their thresholds and not at them, report the number that
triggered them, and run on the profiles (whole and windowed) with values counted from the rows here."""

from __future__ import annotations

import statistics

import pytest

from explorer.analysis.device.advice import SUMMARY_RULES, compute_recommendations, evaluate_summary_rules
from tests.helpers.device_tables import (
    BASE_NS,
    ENGINE_OF,
    cc_ops,
    matmul_profile,
    overlaps,
    profile,
    rmsnorm_profile,
)

B = BASE_NS


@pytest.mark.parametrize("key, metrics, fires, value", [
    ("model_flops_ratio", {"model_flops": 49, "hardware_flops": 100}, True, 0.49),
    ("model_flops_ratio", {"model_flops": 50, "hardware_flops": 100}, False, None),
    ("model_flops_ratio", {"hardware_flops": 100}, False, None),                 # model FLOPs unknown
    ("model_flops_ratio", {"model_flops": 0, "hardware_flops": 0}, False, None),  # nothing to compare
    ("transpose_flops_ratio", {"transpose_flops": 11, "hardware_flops": 100}, True, 0.11),
    ("transpose_flops_ratio", {"transpose_flops": 10, "hardware_flops": 100}, False, None),
    ("spill_reload_ratio", {"spill_reload_bytes": 2_501, "hbm_read_bytes": 10_000}, True, 0.2501),
    ("spill_reload_ratio", {"spill_reload_bytes": 2_500, "hbm_read_bytes": 10_000}, False, None),
    ("dma_average_transfer", {"dma_transfer_average_bytes": 32_767.5}, True, 32_767.5),
    ("dma_average_transfer", {"dma_transfer_average_bytes": 32_768.0}, False, None),
])
def test_rules_fire_past_their_threshold_only(key: str, metrics: dict, fires: bool, value: float | None) -> None:
    found = {r["key"]: r for r in evaluate_summary_rules(metrics)}
    assert (key in found) is fires
    if fires:
        assert found[key]["value"] == value
        rule = next(r for r in SUMMARY_RULES if r.key == key)
        assert found[key]["threshold"] == float(rule.threshold)


def test_thresholds_are_the_published_ones() -> None:
    assert {r.key: (float(r.threshold), r.fires_below) for r in SUMMARY_RULES} == {
        "model_flops_ratio": (0.5, True), "transpose_flops_ratio": (0.1, False),
        "spill_reload_ratio": (0.25, False), "dma_average_transfer": (32 * 1024, True)}


def test_rmsnorm_small_transfers_and_transposes() -> None:
    tables = rmsnorm_profile()
    insts, pk = tables["Instruction"].to_pylist(), tables["DmaPacket"].to_pylist()
    found = {r["key"]: r for r in compute_recommendations(tables)}
    assert found["dma_average_transfer"]["value"] == sum(p["transfer_bytes"] for p in pk) / len(pk)
    assert found["dma_average_transfer"]["unit"] == "bytes"
    assert found["transpose_flops_ratio"]["value"] == pytest.approx(
        sum(r["flops_transpose"] for r in insts) / sum(r["raw_flops"] for r in insts), rel=1e-15)
    spill = sum(r["spill_reload_bytes"] for r in insts) / sum(r["hbm_read_bytes"] for r in insts)
    assert spill <= 0.25 and "spill_reload_ratio" not in found
    assert "model_flops_ratio" not in found           # no Summary row: model FLOPs unknown
    assert "nki_coverage" not in found                 # compiled without NKI debug info


def test_matmul_nki_coverage_per_engine() -> None:
    tables = matmul_profile()
    insts = tables["Instruction"].to_pylist()
    found = [r for r in compute_recommendations(tables) if r["key"] == "nki_coverage"]
    coverage = {}
    for engine in {ENGINE_OF[r["engine"]] for r in insts}:
        mine = [r for r in insts if ENGINE_OF[r["engine"]] == engine]
        coverage[engine] = sum(1 for r in mine if r["nki_source_location"]) / len(mine)
    assert {r["subject"]: r["value"] for r in found} == {e: c for e, c in coverage.items() if c < 0.5}
    assert [r["subject"] for r in found] == ["vector"]


def test_collective_outlier_against_its_groups_median() -> None:
    tables = matmul_profile()
    ops = tables["CcOp"].to_pylist()
    median = statistics.median(o["duration_ns"] for o in ops)
    slow = [o for o in ops if o["duration_ns"] > 2 * median]
    found = [r for r in compute_recommendations(tables) if r["key"] == "collective_outlier"]
    assert [(r["subject"], r["at_ns"], r["value"]) for r in found] == [
        (o["operation"], o["start_ts"], o["duration_ns"] / median) for o in slow]
    assert len(found) == 1
    before = compute_recommendations(tables, B, slow[0]["start_ts"])
    assert not [r for r in before if r["key"] == "collective_outlier"]


def test_rules_on_a_window_use_the_windows_numbers() -> None:
    tables = rmsnorm_profile()
    t0, t1 = B + 500, B + 900   # tile 0: the input DMA trigger and its 16 KiB packets, one small one
    pk = [p for p in tables["DmaPacket"].to_pylist() if overlaps(p["start_ts"], p["end_ts"], t0, t1)]
    average = sum(p["transfer_bytes"] for p in pk) / len(pk)
    found = {r["key"]: r for r in compute_recommendations(tables, t0, t1)}
    assert found["dma_average_transfer"]["value"] == average
    whole = {r["key"]: r for r in compute_recommendations(tables)}
    assert whole["dma_average_transfer"]["value"] != average


@pytest.mark.parametrize("durations, fires", [
    ([100, 300], False),            # in a group of two, neither can take twice the median (their mean)
    ([100, 10_000], False),
    ([100, 100, 200], False),       # exactly twice the median: not over it
    ([100, 100, 201], True),
    ([100, 100, 100, 201], True),
])
def test_collective_outliers_against_the_median_of_their_group(durations: list[int], fires: bool) -> None:
    ops = [(i * 1_000, d, "AllGather", 4096) for i, d in enumerate(durations)]
    other = [(10_000 + i * 1_000, 900, "AllGather", 8192) for i in range(3)]   # another size: its own group
    tables = profile(20_000, [], CcOp=cc_ops(ops + other))
    found = [r for r in compute_recommendations(tables) if r["key"] == "collective_outlier"]
    assert [r["value"] for r in found] == ([durations[-1] / statistics.median(durations)] if fires else [])
