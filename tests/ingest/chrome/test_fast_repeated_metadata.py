"""Traces that repeat their metadata per event (HTA's `mtia_rank_0`: 310k M events naming 10 threads): the DuckDB
path drops every M event a later one in its batch repeats (chrome_fast._last_of_each_metadata). The names a
user sees are the last ones the file sets, on both parser paths, whatever the batch borders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import collect_inputs
from tests.helpers.parsers import PATHS, use_parser


def metadata(name: str, pid: int, tid: int, value: object, key: str = "name") -> dict[str, object]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": {key: value}}


def trace_events() -> list[dict[str, object]]:
    """Slices on two threads, each slice after its names again; thread 1's name goes A, B, then A again,
    process 7's name ends as "last"; names that differ only where a NUL would join them."""
    events: list[dict[str, object]] = []
    names = ["A"] * 40 + ["B"] * 40 + ["A"] * 40
    for i, thread_name in enumerate(names):
        events += [metadata("process_name", 7, 0, "first" if i < 100 else "last"),
                   metadata("thread_name", 7, 1, thread_name),
                   metadata("thread_name", 7, 2, "x\u0000y" if i % 2 else "x"),
                   metadata("thread_sort_index", 7, 2, 3, "sort_index"),
                   {"ph": "X", "name": f"op{i}", "pid": 7, "tid": 1 + i % 2, "ts": 10 * i, "dur": 5, "args": {}}]
    return events


def expected_names(events: list[dict[str, object]]) -> dict[tuple[str, str], str]:
    """Read from the events: (the last process name set, tid) -> the last thread name set."""
    process: dict[object, str] = {}
    thread: dict[tuple[object, object], str] = {}
    for e in events:
        if e["ph"] == "M" and e["name"] == "process_name":
            process[e["pid"]] = e["args"]["name"]  # type: ignore[index]
        elif e["ph"] == "M" and e["name"] == "thread_name":
            thread[(e["pid"], e["tid"])] = e["args"]["name"]  # type: ignore[index]
    return {(process[pid], str(tid)): name for (pid, tid), name in thread.items()}


def names_seen(path: Path, parser: str, monkeypatch: pytest.MonkeyPatch) -> dict[tuple[str, str], str]:
    """(process, tid) -> the track's label (its thread's name), of the slice tracks."""
    use_parser(monkeypatch, parser)
    monkeypatch.setattr(chrome_fast, "BATCH_ROWS", 64)  # the repeats span many batches
    inputs = collect_inputs([path], scratch_root=path.parent)
    try:
        trace = ingest_inputs(inputs)
    finally:
        inputs.cleanup()
    assert trace.tables["slices"].num_rows == 120
    tracks = trace.tables["tracks"].to_pylist()
    return {(t["process"], t["thread"]): t["label"] for t in tracks if t["kind"] == "slice"}


def test_every_path_shows_the_last_names_the_file_sets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = trace_events()
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    want = expected_names(events)
    assert want == {("last", "1"): "A", ("last", "2"): "x\u0000y"}
    for parser in PATHS:
        assert names_seen(path, parser, monkeypatch) == want, parser


def test_the_last_of_each_repeated_metadata_event_stays_with_every_other_row() -> None:
    rows = [("M", "thread_name", "1", "1", '{"name":"A"}'),  # 0: repeated by 4
            ("X", "op", "1", "1", "{}"),                        # 1: not metadata: kept
            ("M", "thread_name", "1", "1", '{"name":"B"}'),  # 2: repeated by 5
            ("i", "mark", "1", "1", "{}"),                      # 3: kept
            ("M", "thread_name", "1", "1", '{"name":"A"}'),  # 4: kept
            ("M", "thread_name", "1", "1", '{"name":"B"}'),  # 5: kept (B after A: B is the name)
            ("M", "thread_name", "1", "2", '{"name":"A"}'),  # 6: another thread: kept
            ("M", "thread_name\u0000", "1", "", '{"name":"A"}')]  # 7: NUL-joined would equal 6's fields: kept
    batch = pa.RecordBatch.from_pylist([dict(zip(("ph", "name", "pid", "tid", "args"), r, strict=True))
                                        for r in rows])
    kept = chrome_fast._last_of_each_metadata(batch, np.arange(len(rows)))
    assert kept.tolist() == [1, 3, 4, 5, 6, 7]
    assert chrome_fast._last_of_each_metadata(batch, np.asarray([1, 3])).tolist() == [1, 3]
