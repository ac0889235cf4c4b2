"""Opcode summary, DMA by queue type and size, and throttling, each against the rows counted in the test."""

from __future__ import annotations

from fractions import Fraction

import pytest

from explorer.analysis.device.breakdown import (
    compute_dma_breakdown,
    compute_opcode_summary,
    compute_throttle_summary,
)
from tests.helpers.device_tables import (
    BASE_NS,
    ENGINE_OF,
    Inst,
    cut,
    matmul_profile,
    overlaps,
    profile,
    rmsnorm_profile,
    share,
    throttles,
    union_length,
)

B = BASE_NS
WINDOWS = [None, (0, 10_000), (2_345, 17_777)]


def _bounds(tables: dict, window: tuple[int, int] | None) -> tuple[int, int]:
    meta = tables["Metadata"].to_pylist()[0]
    return (meta["first_hw_timestamp"], meta["last_hw_timestamp"]) if window is None else (B + window[0],
                                                                                           B + window[1])


def _call(fn, tables: dict, window: tuple[int, int] | None, core: int | None = None):  # type: ignore[no-untyped-def]
    return fn(tables, core=core) if window is None else fn(tables, B + window[0], B + window[1], core)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("make", [rmsnorm_profile, matmul_profile])
def test_opcode_summary_matches_the_rows(make, window: tuple[int, int] | None) -> None:  # type: ignore[no-untyped-def]
    tables = make()
    t0, t1 = _bounds(tables, window)
    rows = [r for r in tables["Instruction"].to_pylist() if overlaps(r["start_ts"], r["end_ts"], t0, t1)]
    want = {}
    for key in {(ENGINE_OF[r["engine"]], r["opcode"]) for r in rows}:
        mine = [r for r in rows if (ENGINE_OF[r["engine"]], r["opcode"]) == key]
        active = union_length([cut(r["start_ts"] + r["evt_wait_time_ns"], r["end_ts"], t0, t1) for r in mine])
        want[key] = (len(mine), sum(b - a for a, b in (cut(r["start_ts"], r["end_ts"], t0, t1) for r in mine)),
                     active, active / (t1 - t0))
    got = _call(compute_opcode_summary, tables, window)
    assert {(r["engine"], r["opcode"]): (r["instruction_count"], r["instruction_time_ns"], r["active_time_ns"],
                                         r["active_time_percent"]) for r in got} == want
    assert [r["active_time_ns"] for r in got] == sorted((r["active_time_ns"] for r in got), reverse=True)


def test_opcode_summary_merges_tensor_rows_and_drops_waits() -> None:
    tables = profile(100, [Inst(0, 10, "TensorMatrix", "MATMUL"), Inst(5, 10, "Tensor", "MATMUL"),
                           Inst(20, 30, "Sync", "SemWait", wait=30)])
    rows = {(r["engine"], r["opcode"]): r for r in compute_opcode_summary(tables)}
    matmul, wait = rows["tensor", "MATMUL"], rows["sync", "SemWait"]
    assert matmul["instruction_count"] == 2 and matmul["active_time_ns"] == 15
    assert wait["active_time_ns"] == 0 and wait["instruction_time_ns"] == 30


@pytest.mark.parametrize("window", WINDOWS)
def test_dma_by_queue_type_and_size_match_the_rows(window: tuple[int, int] | None) -> None:
    tables = rmsnorm_profile()
    t0, t1 = _bounds(tables, window)
    pk = [p for p in tables["DmaPacket"].to_pylist() if overlaps(p["start_ts"], p["end_ts"], t0, t1)]
    got = _call(compute_dma_breakdown, tables, window)
    by_type = {r["queue_type"]: r for r in got["by_queue_type"]}
    assert set(by_type) == {p["queue_type"] for p in pk}
    for kind, row in by_type.items():
        mine = [p for p in pk if p["queue_type"] == kind]
        assert row["packet_count"] == len(mine)
        assert row["queue_count"] == len({p["queue_name"] for p in mine})
        assert row["transfer_bytes"] == round(sum((share(p["transfer_bytes"], p["start_ts"], p["end_ts"], t0, t1)
                                                for p in mine), Fraction(0)))
        assert row["average_bytes"] == sum(p["transfer_bytes"] for p in mine) / len(mine)
        assert row["active_time_ns"] == union_length([cut(p["start_ts"], p["end_ts"], t0, t1) for p in mine])
    small = [p for p in pk if p["transfer_bytes"] < 4096]
    assert got["small_packet_count"] == len(small) > 0
    assert [(b["min_bytes"], b["max_bytes"], b["small"]) for b in got["by_size"]] == [
        (0, 4096, True), (4096, 32768, False), (32768, 1048576, False), (1048576, None, False)]
    assert got["by_size"][0]["packet_count"] == len(small)
    assert got["by_size"][1]["packet_count"] == len([p for p in pk if 4096 <= p["transfer_bytes"] < 32768])
    assert sum(b["packet_count"] for b in got["by_size"]) == len(pk)


def test_dma_breakdown_without_packets_is_empty() -> None:
    got = compute_dma_breakdown(profile(100, [Inst(0, 10, "Vector")]))
    assert got["by_queue_type"] == [] and got["small_packet_count"] == 0
    assert [b["packet_count"] for b in got["by_size"]] == [0, 0, 0, 0]


def _throttled() -> dict:
    return profile(1_000, [], Throttle=throttles([
        (0, 100, 3, 4, "power", 0),     # 1 - 3/4 over [0, 100)
        (200, 100, 1, 2, "power", 0),   # 1 - 1/2 over [200, 300)
        (0, 50, 4, 4, "thermal", 0),    # k = n: no throttling
        (100, 400, 1, 4, "power", 1),
    ]))


def test_throttling_is_one_minus_k_over_n_weighted_by_time() -> None:
    rows = {(r["pcore_idx"], r["throttle_type"]): r for r in compute_throttle_summary(_throttled(), B, B + 400)}
    assert set(rows) == {(0, "power"), (1, "power")}
    power = rows[0, "power"]
    assert power["throttle_active_time_ns"] == 100 + 100
    assert power["throttle_active_time_percent"] == 200 / 400
    assert power["max_achievable_util_with_throttling_percent"] == (
        1 - (100 * (1 - 3 / 4) + 100 * (1 - 1 / 2)) / 400)
    assert power["max_throttling"] == 1 - 1 / 2


def test_throttling_in_a_window_and_on_one_core() -> None:
    tables = _throttled()
    (power,) = [r for r in compute_throttle_summary(tables, B + 50, B + 300) if r["pcore_idx"] == 0]
    # [50, 100) at 1/4 lost and [200, 300) at 1/2 lost, over 250 ns
    assert power["throttle_active_time_ns"] == 50 + 100
    assert power["max_achievable_util_with_throttling_percent"] == (1 - (50 / 4 + 100 / 2) / 250)
    assert [r["pcore_idx"] for r in compute_throttle_summary(tables, core=1)] == [1]
    assert compute_throttle_summary(rmsnorm_profile()) == []
