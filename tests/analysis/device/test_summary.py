"""Device Summary metrics against the published definitions: hand-checkable cases (overlap, semaphore wait,
a window cutting an instruction, empty window, core filter, engine spellings), then the RMSNorm and matmul
profiles against the plain-Python reference in tests/helpers/device_tables.py, for the whole profile and windows."""

from __future__ import annotations

from fractions import Fraction

import pyarrow as pa
import pytest

from explorer.analysis.device.summary import compute_device_summary, recompute_device_summary
from explorer.errors import BadRequest
from tests.helpers.device_tables import (
    BASE_NS,
    Inst,
    Pkt,
    cc_ops,
    matmul_profile,
    profile,
    reference_summary,
    rmsnorm_profile,
    summary_table,
)

B = BASE_NS


def metrics(tables: dict, start: int | None = None, end: int | None = None, core: int | None = None) -> dict:
    return recompute_device_summary(tables, None if start is None else B + start,
                                    None if end is None else B + end, core).metrics


def test_two_overlapping_instructions_on_one_engine_count_once_as_active() -> None:
    m = metrics(profile(100, [Inst(0, 10, "Vector"), Inst(5, 15, "Vector")]))
    assert m["vector_engine_instruction_count"] == 2
    assert m["vector_engine_instruction_time"] == (10 + 15) / 1e9  # plain sum: overlap counted twice
    assert m["vector_engine_active_time"] == (20 - 0) / 1e9        # union [0, 20)
    assert m["vector_engine_active_time_percent"] == 20 / 100
    assert m["scalar_engine_instruction_count"] == 0 and m["scalar_engine_active_time"] == 0
    assert m["total_time"] == 100 / 1e9


def test_semaphore_wait_is_never_active_time() -> None:
    m = metrics(profile(100, [Inst(0, 50, "Sync", wait=30), Inst(60, 40, "Sync", "SemWait", wait=40)]))
    assert m["sync_engine_active_time"] == (50 - 30) / 1e9   # executes over [30, 50) only
    assert m["sync_engine_instruction_time"] == (50 + 40) / 1e9
    assert m["sync_engine_instruction_count"] == 2
    assert m["total_active_time"] == 20 / 1e9


def test_window_cutting_an_instruction_takes_its_flops_and_bytes_pro_rata() -> None:
    tables = profile(200, [Inst(0, 100, "TensorMatrix", flops=1000, hbm_read=400)])
    m = metrics(tables, 25, 50)
    assert m["total_time"] == 25 / 1e9
    assert m["hardware_flops"] == 1000 * 25 // 100
    assert m["hbm_read_bytes"] == 400 * 25 // 100
    assert m["tensor_engine_instruction_count"] == 1          # overlapping rows count whole
    assert m["tensor_engine_active_time_percent"] == 1.0
    flops_per_ns = Fraction(2 * 128 * 128) * Fraction(1.4)
    assert m["hfu_estimated_percent"] == float(Fraction(250) / (flops_per_ns * 25))


def test_pro_rata_shares_are_summed_exactly_then_rounded_once() -> None:
    # each row puts half its FLOPs in [0, 50): 500.5 + 0.5 = 501; rounding per row would give 500 + 0
    tables = profile(200, [Inst(0, 100, "TensorMatrix", flops=1001), Inst(0, 100, "TensorMatrix", flops=1)])
    assert metrics(tables, 0, 50)["hardware_flops"] == 501


def test_rows_touching_the_window_only_at_a_border_are_outside() -> None:
    tables = profile(300, [Inst(0, 100, "Vector", flops=7), Inst(200, 50, "Vector", flops=9),
                           Inst(150, 0, "Vector", flops=5)])
    m = metrics(tables, 100, 200)
    assert m["vector_engine_instruction_count"] == 1   # only the zero-length row at 150 starts inside
    assert m["hardware_flops"] == 5
    assert m["vector_engine_active_time"] == 0


def test_empty_window_has_counts_but_no_percentages() -> None:
    m = metrics(rmsnorm_profile(), 1_000, 1_000)   # across a DMA packet: still nothing inside
    assert m["total_time"] == 0
    assert m["vector_engine_instruction_count"] == 0 and m["dma_transfer_count"] == 0
    assert not [k for k in m if k.endswith("_percent")]


def test_end_before_start_is_a_bad_request() -> None:
    with pytest.raises(BadRequest):
        metrics(rmsnorm_profile(), 2_000, 1_000)


def test_core_filter_keeps_one_physical_core() -> None:
    tables = profile(100, [Inst(0, 40, "Vector", pcore=0, flops=3), Inst(10, 20, "Vector", pcore=1, flops=4)],
                     [Pkt(0, 10, 100, pcore=0), Pkt(50, 10, 300, pcore=1)])
    one = metrics(tables, core=1)
    assert one["vector_engine_instruction_count"] == 1 and one["hardware_flops"] == 4
    assert one["vector_engine_active_time"] == 20 / 1e9
    assert one["dma_transfer_total_bytes"] == 300 and one["dma_transfer_count"] == 1
    both = metrics(tables)
    assert both["vector_engine_active_time"] == 40 / 1e9 and both["dma_transfer_total_bytes"] == 400


@pytest.mark.parametrize("spelling, engine", [
    ("Tensor", "tensor"), ("TensorMatrix", "tensor"), ("tensor", "tensor"), ("PE", "tensor"),
    ("Vector", "vector"), ("DVE", "vector"), ("Scalar", "scalar"), ("ACT", "scalar"),
    ("GpSimd", "gpsimd"), ("POOL", "gpsimd"), ("Sync", "sync"), ("SP", "sync"),
])
def test_engine_spellings_are_normalised(spelling: str, engine: str) -> None:
    m = metrics(profile(10, [Inst(0, 10, spelling)]))
    assert m[f"{engine}_engine_instruction_count"] == 1
    assert sum(m[f"{e}_engine_instruction_count"] for e in ("tensor", "vector", "scalar", "gpsimd", "sync")) == 1


def test_dma_split_by_queue_type() -> None:
    tables = profile(100, [], [Pkt(0, 20, 1000, "input"), Pkt(10, 20, 3000, "output"),
                               Pkt(50, 10, 500, "software_dynamic"), Pkt(70, 10, 500, "hardware_dynamic")])
    m = metrics(tables)
    assert m["static_dma_active_time"] == (30 - 0) / 1e9 and m["static_dma_size"] == 4000
    assert m["static_dma_packet_count"] == 2 and m["static_dma_packet_percent"] == 2 / 4
    assert m["software_dynamic_dma_size_percent"] == 500 / 5000
    assert m["dynamic_dma_active_time_percent"] == (10 + 10) / 100
    assert m["dma_active_time_percent"] == (30 + 10 + 10) / 100
    assert m["dma_transfer_average_bytes"] == 5000 / 4 and m["dma_queue_count"] == 1


def _windows(span: int) -> list[tuple[int, int]]:
    return [(0, span), (0, span // 2), (span // 3, 2 * span // 3), (1_777, 5_333), (span - 999, span + 5_000)]


def _assert_matches(got: dict, want: dict) -> None:
    for key, value in want.items():
        assert key in got, key
        if isinstance(value, int):
            assert got[key] == value, key
        else:
            assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-15), key


@pytest.mark.parametrize("make", [rmsnorm_profile, matmul_profile])
def test_profiles_match_the_reference_for_whole_profile_and_windows(make) -> None:  # type: ignore[no-untyped-def]
    tables = make()
    span = tables["Metadata"].column("last_hw_timestamp")[0].as_py() - B
    for t0, t1 in _windows(span):
        for core in (None, 0, 1):
            _assert_matches(metrics(tables, t0, t1, core), reference_summary(tables, B + t0, B + t1, core))


def test_rmsnorm_is_memory_bound_and_matmul_compute_bound() -> None:
    rms, mm = metrics(rmsnorm_profile()), metrics(matmul_profile())
    assert rms["mm_arithmetic_intensity"] < rms["peak_flops_bandwidth_ratio"] < mm["mm_arithmetic_intensity"]
    assert rms["mbu_estimated_percent"] > rms["hfu_estimated_percent"]
    assert mm["hfu_estimated_percent"] > mm["mbu_estimated_percent"]


def _with_consistent_summary(tables: dict) -> tuple[dict, dict]:
    """The profile plus a Summary row computed by the reference from its rows (model FLOPs: the matmuls')."""
    meta = tables["Metadata"].to_pylist()[0]
    model = sum(r["raw_flops"] - r["flops_transpose"] for r in tables["Instruction"].to_pylist())
    row = reference_summary(tables, meta["first_hw_timestamp"], meta["last_hw_timestamp"], model_flops=model)
    row["model_flops"] = model
    return {**tables, "Summary": summary_table(row)}, row


@pytest.mark.parametrize("make", [rmsnorm_profile, matmul_profile])
def test_whole_profile_recompute_equals_a_consistent_summary_row(make) -> None:  # type: ignore[no-untyped-def]
    tables, row = _with_consistent_summary(make())
    recomputed = recompute_device_summary(tables)
    assert recomputed.from_export == frozenset()
    _assert_matches(recomputed.metrics, row)


def test_without_window_the_exports_own_summary_row_wins() -> None:
    tables, row = _with_consistent_summary(rmsnorm_profile())
    published = {**row, "total_time": 1.25, "hfu_estimated_percent": 0.125, "hardware_flops": 77}
    tables["Summary"] = summary_table(published)
    whole = compute_device_summary(tables)
    assert {k: whole.metrics[k] for k in published} == published
    assert whole.from_export == frozenset(published)
    assert "dma_queue_count" in whole.metrics   # not in the row: recomputed
    windowed = compute_device_summary(tables, B, B + 8_000)
    assert windowed.metrics["total_time"] == 8_000 / 1e9 and windowed.from_export == frozenset()
    assert "model_flops" not in windowed.metrics and "mfu_estimated_percent" not in windowed.metrics
    assert compute_device_summary(tables, core=0).metrics["hardware_flops"] == row["hardware_flops"]


def test_tables_cut_to_the_window_beforehand_give_the_same_summary() -> None:
    tables = rmsnorm_profile()
    t0, t1 = B + 3_333, B + 12_345
    cut_tables = dict(tables)
    for name in ("Instruction", "DmaPacket"):
        rows = tables[name].to_pylist()
        keep = [r for r in rows if r["start_ts"] < t1 and r["end_ts"] > t0]
        cut_tables[name] = tables[name].from_pylist(keep, schema=tables[name].schema)
        assert 0 < len(keep) < len(rows)
    assert recompute_device_summary(cut_tables, t0, t1) == recompute_device_summary(tables, t0, t1)


def test_collectives_count_in_their_own_metrics_and_in_total_activity() -> None:
    cc_instruction = pa.Table.from_pylist([
        {"start_ts": B + 50, "end_ts": B + 80, "duration_ns": 30, "core_idx": 0, "description": "send"},
        {"start_ts": B + 70, "end_ts": B + 90, "duration_ns": 20, "core_idx": 1, "description": "recv"}])
    tables = profile(100, [Inst(0, 60, "Vector")], CcOp=cc_ops([(40, 30, "AllReduce", 64)]),
                     CcInstruction=cc_instruction)
    m = metrics(tables)
    assert m["cc_op_count"] == 1 and m["cc_op_active_time"] == 30 / 1e9
    assert m["cc_cores_instruction_count"] == 2
    assert m["cc_cores_instruction_time"] == (30 + 20) / 1e9
    assert m["cc_cores_instruction_active_time_percent"] == (90 - 50) / 100
    assert m["total_active_time"] == (90 - 0) / 1e9   # [0, 60) vector, [40, 70) op, [50, 90) CC cores
    assert metrics(tables, core=1)["cc_cores_instruction_count"] == 2   # no pcore_idx: kept on every core
