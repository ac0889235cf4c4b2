"""On-chip memory of Neuron device profiles: hand-made SbufAllocation tables (overlaps, back-to-back ranges, two
partitions, rows to skip), and the export fixture (tests/fixtures/neuron/device_export, written from
PROFILE_SCHEMA.md) on the memory page's twin, against its Parquet rows replayed here in plain Python."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from explorer.analysis.onchip_memory import compute_onchip_memory
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
from explorer.views.memory_data import compute_run_memory

EXPORT = Path(__file__).resolve().parents[1] / "fixtures" / "neuron" / "device_export"
KB = 1024


def sbuf(rows: list[tuple[Any, ...]]) -> dict[str, pa.Table]:
    """(partition, start_ts, end_ts, start_address, end_address, tensor_name) rows as an SbufAllocation table."""
    cols = ("partition", "start_ts", "end_ts", "start_address", "end_address", "tensor_name")
    return {"SbufAllocation": pa.table({c: [r[k] for r in rows] for k, c in enumerate(cols)})}


@pytest.mark.parametrize(("rows", "peak", "at", "partition_peak", "tensors"), [
    # back to back on one partition: the first's end frees before the second's start (no 96 KiB moment)
    ([(0, 0, 10, 0, 64 * KB, "x"), (0, 10, 20, 0, 32 * KB, "y")], 64 * KB, 0, 64 * KB, {"x": 64 * KB}),
    # two partitions overlapping in time: the peak counts both, one partition's peak only its own
    ([(0, 0, 10, 0, 4 * KB, "a"), (32, 5, 15, 0, 8 * KB, "b"), (32, 12, 30, 8 * KB, 20 * KB, "c")],
     20 * KB, 12, 20 * KB, {"b": 8 * KB, "c": 12 * KB}),
    # a zero-length row and rows without a range are skipped; a missing name is named as such
    ([(0, 5, 5, 0, 100, "z"), (0, 0, 9, None, 10, "n"), (1, 0, 9, 0, 10, None)], 10, 0, 10,
     {"(no tensor name)": 10}),
])
def test_sbuf_peak(rows: list[tuple[Any, ...]], peak: int, at: int, partition_peak: int,
                   tensors: dict[str, int]) -> None:
    got = compute_onchip_memory("p", "p", sbuf(rows))
    assert got is not None
    assert (got["sbuf_peak_bytes"], got["sbuf_peak_ns"], got["sbuf_partition_peak_bytes"]) == (peak, at, partition_peak)
    assert {t["tensor"]: t["bytes"] for t in got["sbuf_at_peak"]} == tensors
    assert sum(t["bytes"] for t in got["sbuf_at_peak"]) == got["sbuf_peak_bytes"]


def test_a_profile_without_the_tables_has_none() -> None:
    assert compute_onchip_memory("p", "p", {}) is None


def replay(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """(the most bytes allocated at once, its first time) by checking every start time."""
    best = (0, -1)
    for t in sorted({r["start_ts"] for r in rows}):
        live = sum(r["end_address"] - r["start_address"] for r in rows if r["start_ts"] <= t < r["end_ts"])
        if live > best[0]:
            best = (live, t)
    return best


def test_export_fixture_on_the_memory_twin(store: RunStore) -> None:
    run = ingest_paths(store, [EXPORT], "device")
    origin = run.summary.start_ns
    onchip = compute_run_memory(store, run.id)["onchip"]
    profiles = sorted(p.name.removesuffix("@latest") for p in EXPORT.iterdir()
                      if (p / "SbufAllocation.parquet").exists())
    assert sorted(o["profile_id"] for o in onchip) == profiles
    for o in onchip:
        folder = EXPORT / f"{o['profile_id']}@latest"
        rows = pq.read_table(folder / "SbufAllocation.parquet").to_pylist()
        peak, at = replay(rows)
        assert (o["sbuf_allocations"], o["sbuf_peak_bytes"], o["sbuf_peak_ns"]) == (len(rows), peak, at - origin)
        for name in ("SbufUsage", "PsumUsage"):
            usage = pq.read_table(folder / f"{name}.parquet").to_pylist()
            top = max(u["avg_util_percent"] for u in usage)
            [got] = [u for u in o["usage"] if u["table"] == name]
            assert got["max_pct"] == top
            assert got["at_ns"] + origin == min(u["timestamp"] for u in usage if u["avg_util_percent"] == top)
