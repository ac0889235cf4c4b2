"""The device fixtures' Summary rows agree with their raw rows under PROFILE_SCHEMA.md's definitions,
recomputed here in decimal arithmetic from the Parquet files (the metrics code is checked against these)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

EXPORT = Path(__file__).resolve().parents[2] / "fixtures" / "neuron" / "device_export"
PROFILES = ("rmsnorm_naive", "matmul")
ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync")


def rows(profile: str, table: str) -> list[dict[str, Any]]:
    folder = EXPORT / f"{profile}@latest"
    files = sorted(folder.glob(f"{table}_*.parquet")) or [folder / f"{table}.parquet"]
    return [r for f in files for r in pq.read_table(f).to_pylist()]


def union(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, -1
    for s, e in sorted(intervals):
        s = max(s, end)
        if e > s:
            total += e - s
        end = max(end, e)
    return total


def d(value: float) -> Decimal:
    return Decimal(repr(value))


@pytest.fixture(params=PROFILES)
def profile(request: pytest.FixtureRequest) -> dict[str, Any]:
    name = request.param
    meta = rows(name, "Metadata")[0]
    return {"name": name, "meta": meta, "summary": rows(name, "Summary")[0], "inst": rows(name, "Instruction"),
            "dma": rows(name, "DmaPacket"), "t_ns": meta["last_hw_timestamp"] - meta["first_hw_timestamp"]}


def close(got: float | None, want: Decimal) -> bool:
    return got is not None and abs(d(got) - want) <= abs(want) * Decimal("1e-12")


def test_utilisation_metrics(profile: dict[str, Any]) -> None:
    meta, s, t = profile["meta"], profile["summary"], Decimal(profile["t_ns"]) / Decimal(10**9)
    max_ops = 2 * meta["tensor_engine_num_rows"] * meta["tensor_engine_num_cols"] * d(
        meta["tensor_engine_clock_freq"]) * 10**9
    hw = sum(r["raw_flops"] or 0 for r in profile["inst"])
    tr = sum(r["flops_transpose"] or 0 for r in profile["inst"])
    moved = sum((r["hbm_read_bytes"] or 0) + (r["hbm_write_bytes"] or 0) for r in profile["inst"])
    bw = d(meta["hbm_ddr_bandwidth"])
    assert (s["hardware_flops"], s["transpose_flops"]) == (hw, tr)
    assert s["hbm_read_bytes"] + s["hbm_write_bytes"] == moved
    assert close(s["total_time"], t)
    assert close(s["hfu_estimated_percent"], hw / (max_ops * t))
    assert close(s["mfu_inst_estimated_percent"], (hw - tr) / (max_ops * t))
    assert close(s["mbu_estimated_percent"], moved / t / bw)
    assert close(s["mm_arithmetic_intensity"], Decimal(hw - tr) / moved)
    assert close(s["peak_flops_bandwidth_ratio"], max_ops / bw)
    if s["model_flops"] is None:
        assert s["mfu_estimated_percent"] is None
    else:
        assert close(s["mfu_estimated_percent"], s["model_flops"] / (max_ops * t))


def test_engine_and_dma_activity(profile: dict[str, Any]) -> None:
    s, t_ns = profile["summary"], profile["t_ns"]
    active_rows = rows(profile["name"], "ActiveTime")
    for engine in ENGINES:
        mine = [r for r in profile["inst"] if r["engine"].lower() == engine]
        active = union([(r["start_ts"], r["end_ts"]) for r in mine])
        assert s[f"{engine}_engine_instruction_count"] == len(mine)
        assert close(s[f"{engine}_engine_active_time_percent"], Decimal(active) / t_ns)
        assert close(s[f"{engine}_engine_instruction_time"], Decimal(sum(r["duration_ns"] for r in mine)) / 10**9)
        assert sum(r["duration_ns"] for r in active_rows if r["engine"].lower() == engine) == active
    dma = profile["dma"]
    total = sum(r["transfer_bytes"] for r in dma)
    assert (s["dma_transfer_count"], s["dma_transfer_total_bytes"]) == (len(dma), total)
    assert close(s["dma_transfer_average_bytes"], Decimal(total) / len(dma))
    assert close(s["dma_active_time_percent"], Decimal(union([(r["start_ts"], r["end_ts"]) for r in dma])) / t_ns)


def test_the_two_kernels_sit_on_opposite_sides_of_the_ridge() -> None:
    rms, mm = (rows(p, "Summary")[0] for p in PROFILES)
    assert rms["mm_arithmetic_intensity"] < rms["peak_flops_bandwidth_ratio"]  # memory-bound
    assert mm["mm_arithmetic_intensity"] > mm["peak_flops_bandwidth_ratio"]  # compute-bound
    assert rms["dma_transfer_average_bytes"] < 32 * 1024 <= mm["dma_transfer_average_bytes"]
    assert any(r["transfer_bytes"] < 4 * 1024 for r in rows("rmsnorm_naive", "DmaPacket"))
    # the vector engine's instructions overlap once per tile: instruction time exceeds active time
    assert rms["vector_engine_instruction_time"] > rms["vector_engine_active_time"]


def summary_files() -> list[Path]:
    """Every Summary Parquet file among the test fixtures and the real traces beside the checkout (if any)."""
    tests = Path(__file__).resolve().parents[2]
    roots = [tests / "fixtures", tests.parent.parent / "shared" / "traces"]
    return sorted(p for root in roots if root.is_dir() for p in root.rglob("Summary*.parquet"))


@pytest.mark.parametrize("path", summary_files(), ids=lambda p: p.parent.name)
def test_summary_percent_fields_are_fractions_of_one(path: Path) -> None:
    """As published exports write them: total_active_time_percent = total_active_time / total_time (a real one:
    0.20825356317 / 0.213808050051 = 0.9740211517776104), never x100; every active-time share is within [0, 1]."""
    for row in pq.read_table(path).to_pylist():
        assert row["total_time"] > 0
        assert d(row["total_active_time_percent"]) == pytest.approx(
            d(row["total_active_time"]) / d(row["total_time"]), rel=Decimal("1e-9"))
        shares = [k for k, v in row.items() if k.endswith("active_time_percent") and v is not None]
        assert len(shares) >= 7  # total, dma and the five engines
        assert all(0 <= row[k] <= 1 for k in shares), shares
