"""Neuron HBM usage by type on the memory page, against the export's SystemProfileHbmUsage rows read with pyarrow."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore
from explorer.views.memory import compute_run_memory

EXPORT = Path(__file__).resolve().parent.parent / "fixtures" / "neuron" / "device_export"


def test_hbm_peak_and_types_at_it_equal_the_export_rows(store: RunStore) -> None:
    rec = ingest_paths(store, [EXPORT])
    got = {h["where"]: h for h in compute_run_memory(store, rec.id)["hbm"]}
    rows: list[dict[str, Any]] = pq.read_table(EXPORT / "system@latest" / "SystemProfileHbmUsage.parquet").to_pylist()
    by_where: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_where[f"device {r['device_idx']} HBM {r['hbm_idx']}"].append(r)
    assert set(got) == set(by_where) and got
    for where, mine in by_where.items():
        mine.sort(key=lambda r: r["timestamp"])
        peak = max(mine, key=lambda r: r["total_bytes"])  # (max keeps the first of equals, as the page does)
        h = got[where]
        assert (h["peak_bytes"], h["peak_ns"]) == (peak["total_bytes"], peak["timestamp"] - rec.summary.start_ns)
        types = {c.removesuffix("_bytes"): peak[c] for c in peak if c.endswith("_bytes") and c != "total_bytes"
                 and any(r[c] for r in rows) and peak[c]}
        assert {r["type"]: r["bytes"] for r in h["at_peak"]} == types
