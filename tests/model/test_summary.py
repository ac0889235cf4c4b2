"""The typed run summary: summaries stored by any earlier version still load, what was stored comes back
unchanged, and a ready run's summary counts what its input file holds."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy

from explorer.model.summary import RunSummary, load_summary
from explorer.runs.ingest import ingest_paths
from explorer.store.runs import RunStore

TINY = Path(__file__).resolve().parent.parent / "api" / "fixtures" / "tiny_kineto.json"
OLD = [
    {},  # a run still queued, or failed before its summary was written
    {"start_ns": 5, "end_ns": 9, "span_ns": 4, "slices": 3},  # written before device totals existed
    {"start_ns": 0, "end_ns": 1, "span_ns": 1, "device": {"device_total_ns": 7}, "legacy_field": [1, 2]},
]


@pytest.mark.parametrize("stored", OLD)
def test_old_summaries_load_and_round_trip(stored: dict[str, object]) -> None:
    summary = load_summary(json.dumps(stored))
    assert summary.stored() == stored  # the API shows exactly what was stored, extra fields included
    device = stored.get("device")
    assert summary.device_total_ns == (device["device_total_ns"] if isinstance(device, dict) else 0)
    assert summary.span_ns == stored.get("span_ns", 0)


def test_old_catalog_rows_load_through_the_store(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "data")
    rec = ingest_paths(store, [TINY], "tiny")
    engine = sqlalchemy.create_engine(store.catalog.url)  # SQLite, or the PostgreSQL switch's schema
    try:
        with engine.begin() as db:
            db.execute(sqlalchemy.text("UPDATE runs SET summary = :s WHERE id = :id"),
                       {"s": json.dumps(OLD[1]), "id": rec.id})
    finally:
        engine.dispose()
    old = store.get(rec.id).summary
    assert isinstance(old, RunSummary) and old.device_total_ns == 0 and old.slices == 3


def test_a_ready_summary_counts_the_input(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "data")
    rec = ingest_paths(store, [TINY], "tiny")
    s = rec.summary
    doc = json.loads(TINY.read_text(), parse_float=Decimal)
    events = [e for e in doc["traceEvents"] if e.get("ph") != "M"]
    complete = [e for e in events if e.get("ph") == "X"]
    device = [e for e in complete if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    base = int(doc["baseTimeNanoseconds"])
    assert s.slices == len(complete)
    assert s.device_total_ns == int(sum(Decimal(e["dur"]) * 1000 for e in device))
    assert s.start_ns == base + int(min(Decimal(e["ts"]) for e in events) * 1000)
    assert s.end_ns == base + int(max(Decimal(e["ts"]) + Decimal(e.get("dur", 0)) for e in events) * 1000)
    assert s.span_ns == s.end_ns - s.start_ns
    assert [a.name for a in s.artifacts] == [TINY.name]
    assert store.get(rec.id).summary == s  # what the catalog gives back is what the store built
