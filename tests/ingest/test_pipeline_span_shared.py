"""Every real Kineto trace in ../shared/traces: the run's span is first to last real event, by an independent
reading (tests/helpers/span_traces.py: json + decimal, profiler markers left out), and the extent holds the markers.
Skips when ../shared is absent."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from explorer.analysis.breakdown import compute_breakdown
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import collect_inputs
from explorer.store.runs import build_summary
from tests.helpers.span_traces import all_bounds, device_intervals, is_marker, real_bounds, union_ns
from tests.ingest.test_pipeline_shared_traces import MEMORY_TIMELINES, NOT_TIMELINES, SHARED

pytestmark = [pytest.mark.shared, pytest.mark.slow]
KINETO_DIRS = ("HolisticTraceAnalysis", "kineto", "dtu_mlops")


def kineto_traces() -> list[Path]:
    if not SHARED.is_dir():
        return []
    return sorted(p for d in KINETO_DIRS if (SHARED / d).is_dir() for p in (SHARED / d).rglob("*")
                  if p.is_file() and p.name not in NOT_TIMELINES and p.name not in MEMORY_TIMELINES
                  and p.name != "INDEX.md")


def load_events(path: Path) -> list[dict[str, Any]]:
    """The file's events with every number as a Decimal (ns-resolution traces lose digits in a float)."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw, parse_float=Decimal)
    events = doc if isinstance(doc, list) else doc.get("traceEvents", [])
    return [e for e in events if isinstance(e, dict)]


@pytest.mark.parametrize("path", kineto_traces(), ids=lambda p: str(p.relative_to(SHARED)))
def test_span_is_first_to_last_real_event(path: Path, tmp_path: Path) -> None:
    inputs = collect_inputs([path], scratch_root=tmp_path)
    try:
        trace = ingest_inputs(inputs)
    finally:
        inputs.cleanup()
    s = build_summary(trace, [])
    events = load_events(path)
    lo, hi = real_bounds(events)
    all_lo, all_hi = all_bounds(events)
    assert s.span_ns == hi - lo
    # the files' clocks differ from the run's by a constant (Kineto's baseTimeNanoseconds): compare offsets
    assert (s.start_ns - s.extent_start_ns, s.extent_end_ns - s.end_ns) == (lo - all_lo, all_hi - hi)
    if any(is_marker(e) for e in events):
        assert s.span_ns <= all_hi - all_lo
    per_device = device_intervals(events)
    if per_device:  # busy per device is the union of its executions (Kineto: pid = device), never a sum
        slices = trace.tables["slices"]
        slices = pa.table({c: slices.column(c).cast(pa.string()) if pa.types.is_dictionary(slices.schema.field(c).type)
                           else slices.column(c) for c in slices.column_names})
        bd = compute_breakdown(slices, trace.tables["tracks"], trace.tables["flows"], s.start_ns, s.end_ns, top=0)
        assert sorted(d["busy_ns"] for d in bd["devices"]) == sorted(union_ns(v) for v in per_device.values())
