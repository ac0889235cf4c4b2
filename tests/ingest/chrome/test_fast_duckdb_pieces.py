"""The DuckDB path reads a big events array as several files cut between events (chrome_fast.DUCKDB_PIECES),
in parallel: the pieces hold exactly the file's events in order, a cut inside an event falls back to one piece,
and the run is the same as the one-piece read."""

from __future__ import annotations

import json
import logging
import mmap
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.chrome import kscan
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import collect_inputs
from tests.fuzz.corpus import SHARED_TRACES


@pytest.fixture(autouse=True)
def duckdb_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """Big files here are DuckDB's: read as where the compiled reader (tests/ingest/chrome/test_kscan.py) is not built."""
    monkeypatch.setattr(kscan, "_LIB", None)


def _events(n: int, nested: bool = True) -> list[dict[str, Any]]:
    """Complete events; `nested`: their args hold arrays of objects (`}, {` inside an event)."""
    return [{"ph": "X", "name": f"op{i % 7}", "cat": "cpu_op", "pid": 1, "tid": i % 3, "ts": i * 10, "dur": 4,
             "args": {"list": [{"a": i}, {"b": [i, {"c": None}]}] if nested else [i], "text": "x" * (i % 5)}}
            for i in range(n)]


def _ranges_of(path: Path, pieces: int) -> list[tuple[int, int]]:
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        key = m.find(b'"traceEvents"')
        open_at = m.find(b"[", key)
        return chrome_fast._piece_ranges(m, open_at, chrome_fast._array_end(m, key, open_at)[0], pieces)


@pytest.mark.parametrize(("separator", "nested"), [(",\n", True), (" ,\n\t ", True), (", ", False), (",", False)])
def test_pieces_hold_every_event_once_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               separator: str, nested: bool) -> None:
    """Events one a line (Kineto) are cut at a line even when their args hold `}, {`; on one line, at `},{`."""
    monkeypatch.setattr(chrome_fast, "PIECE_MIN_BYTES", 4096)
    events = _events(3000, nested)
    path = tmp_path / "trace.json"
    path.write_text('{"traceEvents": [' + separator.join(json.dumps(e) for e in events) + '], "x": [1]}')
    ranges = _ranges_of(path, 8)
    assert len(ranges) == 8
    with path.open("rb") as f, chrome_fast._carved(f.fileno(), ranges, tmp_path) as files:
        read = [json.loads(file.read_text()) for file in files]
        assert all(isinstance(piece, list) and len(piece) > 100 for piece in read)
        assert [e for piece in read for e in piece] == events
    assert not files[0].exists()  # removed on exit


def test_no_piece_is_smaller_than_the_minimum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": _events(3000, nested=False)}))
    (lo, hi), = _ranges_of(path, 1)
    monkeypatch.setattr(chrome_fast, "PIECE_MIN_BYTES", (hi - 1 - lo) // 3)
    assert len(_ranges_of(path, 8)) == 3
    monkeypatch.setattr(chrome_fast, "PIECE_MIN_BYTES", hi - lo)
    assert len(_ranges_of(path, 8)) == 1


def _tables(path: Path, tmp_path: Path) -> dict[str, pa.Table]:
    """The run's tables, the slices with their args whether they were held or spilled."""
    inputs = collect_inputs([path], scratch_root=tmp_path)
    try:
        trace = ingest_inputs(inputs)
        slices = trace.tables["slices"]
        if "args" not in slices.column_names:
            slices = slices.append_column("args", trace.slice_args_of(np.arange(slices.num_rows)))
        return {**trace.tables, "slices": slices}
    finally:
        inputs.cleanup()


def test_a_cut_inside_an_event_reads_the_file_as_one_piece(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """An args string full of `},{`: the cuts land inside it, its pieces are not JSON, DuckDB fails on them,
    and the file is read again whole, still on the DuckDB path, into the run the msgspec path gives."""
    events = _events(50)
    events.insert(25, {"ph": "X", "name": "tricky", "pid": 1, "tid": 9, "ts": 5, "dur": 1,
                       "args": {"note": "},{" * 20000}})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(chrome_fast, "FAST_MIN_BYTES", 1 << 40)
    expected = _tables(path, tmp_path)
    monkeypatch.setattr(chrome_fast, "FAST_MIN_BYTES", 0)
    monkeypatch.setattr(chrome_fast, "PIECE_MIN_BYTES", 1024)
    monkeypatch.setattr(chrome_fast, "SPILL_MIN_BYTES", 0)  # the args spilled as read: the failed try's too
    text = path.read_bytes()
    start = text.index(b'"note": "') + len(b'"note": "')
    note = (start, start + len("},{") * 20000)
    assert any(note[0] < lo < note[1] for lo, _ in _ranges_of(path, chrome_fast.DUCKDB_PIECES)[1:])
    with caplog.at_level(logging.INFO, logger=chrome_fast.__name__):
        got = _tables(path, tmp_path)
    messages = [r.message for r in caplog.records]
    assert any("read again as one piece" in m for m in messages), messages
    assert not any("fast path not used" in m for m in messages), messages
    for name in ("flows", "tracks", "op_stats"):
        assert got[name].equals(expected[name]), name
    assert got["slices"].drop_columns(["args"]).equals(expected["slices"].drop_columns(["args"]))
    # the args' text: as DuckDB writes it on this path, as the file has it on the other
    assert [json.loads(a) for a in got["slices"].column("args").to_pylist()] == [
        json.loads(a) for a in expected["slices"].column("args").to_pylist()]
    assert not list(tmp_path.rglob("*.args.arrow"))  # the failed try's spill is gone (the run's with its scratch)


@pytest.mark.skipif(not SHARED_TRACES.exists(), reason="../shared/traces is not here")
def test_a_real_trace_read_in_pieces_is_the_run_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip
    source = SHARED_TRACES / "HolisticTraceAnalysis/tests/data/trace_diff/control/control.json.gz"
    if not source.exists():
        pytest.skip(f"{source} is not here")
    path = tmp_path / "control.json"
    path.write_bytes(gzip.decompress(source.read_bytes()))
    monkeypatch.setattr(chrome_fast, "FAST_MIN_BYTES", 0)
    monkeypatch.setattr(chrome_fast, "PIECE_MIN_BYTES", 1 << 40)
    whole = _tables(path, tmp_path)
    monkeypatch.setattr(chrome_fast, "PIECE_MIN_BYTES", 2 * 2**20)
    assert len(_ranges_of(path, chrome_fast.DUCKDB_PIECES)) == chrome_fast.DUCKDB_PIECES
    pieces = _tables(path, tmp_path)
    for name in ("slices", "flows", "tracks", "counters", "instants", "op_stats", "op_stats_by_shape"):
        assert pieces[name].equals(whole[name]), name
