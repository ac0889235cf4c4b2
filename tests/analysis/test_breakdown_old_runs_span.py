"""Runs stored before the span rule and the device names (issue 34 points 3, 4) read back as they were: the
summary without extent fields keeps its span and the timeline opens on it; tracks without a device name
(labels `thread 7`, `thread 7 (overlap 1)`) still make one device per stream's rows, busy their union."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from explorer.analysis.breakdown import compute_breakdown
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import collect_inputs
from explorer.model.summary import load_summary
from tests.helpers.span_traces import device_intervals, dumps, overlap_trace, union_ns


def test_old_summary_reads_back_with_its_span() -> None:
    old = load_summary({"start_ns": 1_000, "end_ns": 9_000, "span_ns": 8_000, "slices": 3})
    assert (old.extent_start_ns, old.extent_end_ns) == (0, 0)
    assert old.extent_rel == (0, 8_000)
    assert "extent_start_ns" not in old.stored()  # what was stored is given back as stored
    new = load_summary({"start_ns": 1_000, "end_ns": 9_000, "span_ns": 8_000, "extent_start_ns": 400,
                        "extent_end_ns": 9_500})
    assert new.extent_rel == (-600, 8_500)


def test_old_tracks_without_device_names_group_by_stream(tmp_path: Path) -> None:
    events = overlap_trace()
    path = tmp_path / "overlap.json"
    path.write_bytes(dumps(events))
    inputs = collect_inputs([path], scratch_root=tmp_path)
    try:
        trace = ingest_inputs(inputs)
    finally:
        inputs.cleanup()
    tracks = trace.tables["tracks"]
    hw = [lane == "hardware" for lane in tracks.column("lane").to_pylist()]
    old_labels = [label.replace("GPU 0 · stream 7", "thread 7") if h else label
                  for label, h in zip(tracks.column("label").to_pylist(), hw, strict=True)]
    assert sorted(x for x, h in zip(old_labels, hw, strict=True) if h) == ["thread 7", "thread 7 (overlap 1)"]
    old = tracks.set_column(tracks.column_names.index("label"), "label", pa.array(old_labels, pa.string()))
    old = old.set_column(old.column_names.index("device"), "device", pa.array([""] * old.num_rows, pa.string()))
    start, end = trace.meta["start_ns"], trace.meta["end_ns"]
    assert isinstance(start, int) and isinstance(end, int)
    slices = trace.tables["slices"]  # as the store reads it back: text columns plain, not dictionary-coded
    slices = pa.table({c: slices.column(c).cast(pa.string()) if pa.types.is_dictionary(slices.schema.field(c).type)
                       else slices.column(c) for c in slices.column_names})
    bd = compute_breakdown(slices, old, trace.tables["flows"], start, end)
    (busy,) = device_intervals(events).values()
    assert [(d["device"], d["busy_ns"]) for d in bd["devices"]] == [("thread 7", union_ns(busy))]
