"""Memory in compare on real captures: activation checkpointing on against off lowers the peak, and the change by
owner op and by module sums to the peak's change, also once cut to the biggest changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from explorer.model.shapes import MemoryOwnerDelta
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
from explorer.views.compare_memory import OTHER_OWNERS, compute_compare_memory, cut_deltas
from tests.helpers.memory_profiles import WIDTH, blocks_profile, read_trace

BLOCKS = 4

pytest.importorskip("torch")


def test_checkpointing_lowers_the_peak_by_owner(store: RunStore, tmp_path: Path) -> None:
    off, on = tmp_path / "off.json", tmp_path / "on.json"
    blocks_profile(off, checkpoint=False, blocks=BLOCKS)
    blocks_profile(on, checkpoint=True, blocks=BLOCKS)
    ids = [ingest_paths(store, [p]).id for p in (off, on)]
    [m] = compute_compare_memory(store, ids)
    [p] = m["peaks"]
    peaks = [max(e["args"]["Total Allocated"] for e in read_trace(f)[0]) for f in (off, on)]
    assert (p["baseline_bytes"], p["bytes"]) == tuple(peaks) and p["delta"] < 0  # fewer activations kept
    for rows in (p["by_owner"], p["by_module"]):
        assert sum(r["delta"] for r in rows) == p["delta"]
    # the hidden activations (128 x 4*WIDTH float32) of the blocks not being recomputed are no longer kept: the
    # GELU outputs (aten::gelu) and the wide Linear outputs that GELU saves (aten::addmm)
    hidden = 128 * 4 * WIDTH * 4
    assert {r["owner"]: r["delta"] for r in p["by_owner"] if r["delta"] < 0} == {
        "aten::addmm": -(BLOCKS - 1) * hidden, "aten::gelu": -(BLOCKS - 1) * hidden}
    assert compute_compare_memory(store, ids[:1] + ids[:1])[0]["peaks"][0]["delta"] == 0


def test_cut_keeps_the_sums() -> None:
    rows = [MemoryOwnerDelta(owner=f"op{k}", bytes=k * 10, baseline_bytes=k, delta=k * 9) for k in range(20, 0, -1)]
    cut = cut_deltas(rows, top=5)
    assert [r["owner"] for r in cut] == ["op20", "op19", "op18", "op17", "op16", OTHER_OWNERS]
    for key in ("bytes", "baseline_bytes", "delta"):
        assert sum(r[key] for r in cut) == sum(r[key] for r in rows)  # type: ignore[literal-required]
    assert cut_deltas(rows[:6], top=5) == rows[:6]  # one row past the top is shown by name, not summed
