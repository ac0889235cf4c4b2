"""The Chrome/Kineto parser paths (msgspec: explorer.ingest.chrome.decode; the compiled reader and DuckDB's:
chrome_fast) agree on input DuckDB's reader takes and msgspec does not: NaN and Infinity literals, trailing
commas, values nested past msgspec's depth limit, and event fields of the wrong JSON type (`true` as a ts
reads as 1 in DuckDB). Each row says what the user gets, written out here from the input, and every path
must give exactly that (the compiled reader refuses each of these files, which then take DuckDB's path).
"""

from __future__ import annotations

import json
import logging
import typing
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest

from explorer.errors import ExplorerError
from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.chrome.decode import CheckedEvent, decode_events, looks_like_chrome, refusal
from explorer.ingest.chrome.feed import Event
from explorer.ingest.limits import IngestLimits
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import collect_inputs
from tests.fuzz.corpus import SHARED_TRACES
from tests.helpers.parsers import PATHS, use_parser

FILE = "trace.json"
GOOD = '{"ph": "X", "name": "good", "pid": 1, "tid": 1, "ts": 2, "dur": 3}'  # 2 µs, 3 µs
DEEP = "[" * 5000 + "]" * 5000


def _doc(*events: str, wrapped: bool = True) -> str:
    body = "[" + ", ".join(events) + "]"
    return '{"traceEvents": ' + body + "}" if wrapped else body


def _x(extra: str) -> str:
    """A complete event named `odd` with one field changed or added (`extra` is JSON text)."""
    fields = {"ph": '"X"', "name": '"odd"', "pid": "1", "tid": "1", "ts": "5", "dur": "1"}
    key, _, value = extra.partition(": ")
    fields[json.loads(key)] = value
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"


NOT_JSON = f"{FILE}: not valid JSON (JSON is malformed: "
TOO_DEEP = f"{FILE}: not readable JSON (values nested too deep)"
# (case, document, what the user gets: an error's first words, or the (name, ts_ns, dur_ns) slices stored
# and the warning codes with their counts)
CASES: list[Any] = [
    ("NaN in args", _doc(GOOD, _x('"args": {"v": NaN}')), NOT_JSON + "invalid character"),
    ("Infinity as a ts", _doc(GOOD, _x('"ts": Infinity')), NOT_JSON + "invalid character"),
    ("-Infinity as a pid", _doc(GOOD, _x('"pid": -Infinity'), wrapped=False), NOT_JSON + "invalid character"),
    ("NaN under a key no reader keeps", _doc(GOOD, _x('"extra": [NaN]')), NOT_JSON + "invalid character"),
    ("a trailing comma in args", _doc(GOOD, _x('"args": {"v": [1, 2,]}')), NOT_JSON + "trailing comma in array"),
    ("a trailing comma in an event", _doc(GOOD, _x('"cat": "c",}')[:-1]), NOT_JSON + "trailing comma in object"),
    ("args nested 5,000 deep", _doc(GOOD, _x(f'"args": {{"deep": {DEEP}}}')), TOO_DEEP),
    ("5,000 deep under a key no reader keeps", _doc(GOOD, _x(f'"extra": {DEEP}'), wrapped=False), TOO_DEEP),
    ("true as a ts", _doc(GOOD, _x('"ts": true')), ({("good", 2000, 3000)}, {"mistyped_event": 1})),
    ("false as a dur", _doc(GOOD, _x('"dur": false')), ({("good", 2000, 3000)}, {"mistyped_event": 1})),
    ("a number as a name", _doc(GOOD, _x('"name": 7')), ({("good", 2000, 3000)}, {"mistyped_event": 1})),
    ("true as a pid", _doc(GOOD, _x('"pid": true')), ({("good", 2000, 3000)}, {"mistyped_event": 1})),
    ("1.5 as a tid", _doc(GOOD, _x('"tid": 1.5'), wrapped=False), ({("good", 2000, 3000)}, {"mistyped_event": 1})),
    ("null as a cat", _doc(GOOD, _x('"cat": null')), ({("good", 2000, 3000)}, {"mistyped_event": 1})),
    ("an object as an id", _doc(GOOD, _x('"id": {"a": 1}')), ({("good", 2000, 3000)}, {"mistyped_event": 1})),
    ("only events with a boolean ts", _doc(_x('"ts": true'), _x('"ts": false')),
     f"{FILE}: no usable events (2 events with fields of the wrong type (not stored))"),
    ("numeric text is a number on both", _doc(GOOD, _x('"ts": "7.5"')),
     ({("good", 2000, 3000), ("odd", 7500, 1000)}, {})),
]


def _ingest(path: Path, path_mode: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """What the user gets from one ingest on one path: an error message, or (slices, warning counts)."""
    use_parser(monkeypatch, path_mode)
    inputs = collect_inputs([path], scratch_root=path.parent)
    try:
        trace = ingest_inputs(inputs)
    except ExplorerError as exc:
        return exc.message
    finally:
        inputs.cleanup()
    slices = trace.tables["slices"].select(["name", "ts_ns", "dur_ns"]).to_pylist()
    return {(s["name"], s["ts_ns"], s["dur_ns"]) for s in slices}, {w.code: w.count for w in trace.warnings}


def _values(case: Any) -> tuple[Any, ...]:
    return tuple(case.values) if hasattr(case, "values") else tuple(case)


@pytest.mark.parametrize(("case", "doc", "expected"), CASES, ids=[_values(c)[0] for c in CASES])
def test_both_paths_give_the_same_answer(case: str, doc: str, expected: Any, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / FILE
    path.write_text(doc)
    got = {mode: _ingest(path, mode, monkeypatch) for mode in PATHS}
    assert got["msgspec"] == got["duckdb"] == got["native"], case
    if isinstance(expected, str):
        assert isinstance(got["duckdb"], str) and got["duckdb"].startswith(expected), got
    else:
        assert got["duckdb"] == expected


DUCKDB_READS = [_values(c) for c in CASES if not getattr(c, "marks", None)
                and _values(c)[0] not in ("Infinity as a ts", "numeric text is a number on both")]


@pytest.mark.parametrize(("case", "doc"), [c[:2] for c in DUCKDB_READS], ids=[c[0] for c in DUCKDB_READS])
def test_duckdb_alone_would_read_these(case: str, doc: str, tmp_path: Path) -> None:
    """Why the check exists: DuckDB's reader takes each of these documents without an error."""
    path = tmp_path / FILE
    path.write_text(doc)
    with chrome_fast._open_events(path, tmp_path, IngestLimits().memory_mb) as (reader, _meta):
        assert sum(b.n for b in chrome_fast._read_all(reader, 0, None)) >= 1, case
    assert refusal(path.read_bytes()) is not None


@pytest.mark.parametrize("path_mode", ["native", "duckdb"])
def test_a_well_formed_file_stays_on_its_fast_path(path_mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / FILE
    path.write_text(_doc(GOOD, _x('"args": {"v": [1.5, "NaN", {"w": null}], "Input Dims": [[1]]}'),
                         _x('"ts": "7.5"'), _x('"extra": {"a": [true, false]}')))
    with caplog.at_level(logging.INFO, logger=chrome_fast.__name__):
        slices, warnings = _ingest(path, path_mode, monkeypatch)
    left = [r.message for r in caplog.records if "not used" in r.message]
    assert left == [], left
    assert slices == {("good", 2000, 3000), ("odd", 5000, 1000), ("odd", 7500, 1000)} and warnings == {}


def _nested(depth: int) -> bytes:
    return b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, "args": {"a": ' + b"[" * depth + b"]" * depth + b"}}]}"


def _checked(path: Path) -> bool:
    """Whether the DuckDB path's check lets the file through (as parse_chrome_file runs it)."""
    try:
        with chrome_fast._Check(path):
            pass
    except chrome_fast._Unsupported:
        return False
    return True


def test_the_check_stops_no_deeper_than_the_msgspec_path(tmp_path: Path) -> None:
    """msgspec's depth limit depends on the stack it is called from; the check runs in a process of its own with a
    margin of frames, so it refuses at least wherever the msgspec path does (here, called from pytest)."""
    def msgspec_reads(depth: int) -> bool:
        try:
            decode_events(_nested(depth), FILE)
        except ExplorerError:
            return False
        return True

    lo, hi = 1, 5000  # the first depth the msgspec path refuses
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if msgspec_reads(mid) else (lo, mid)
    path = tmp_path / FILE
    for depth, checked in ((lo, False), (lo + 1, False), (5000, False), (100, True)):
        path.write_bytes(_nested(depth))
        assert _checked(path) is checked, depth


def test_the_check_types_every_field_event_types() -> None:
    """CheckedEvent checks the fields Event types, with Event's types, but its times (int | Decimal | None) as
    int | float | str | None (no Decimal built): a field added to Event must be added there too. Event's raw
    JSON fields (args, id2) are only checked as JSON."""
    event, checked = typing.get_type_hints(Event), typing.get_type_hints(CheckedEvent)
    typed = [f.name for f in msgspec.structs.fields(Event) if event[f.name] is not msgspec.Raw]
    assert [f.name for f in msgspec.structs.fields(CheckedEvent)] == typed
    for name in typed:
        assert checked[name] == (int | float | str | None if event[name] == int | Decimal | None else event[name]), name
    defaults = {f.name: f.default for f in msgspec.structs.fields(Event)}
    assert {f.name: f.default for f in msgspec.structs.fields(CheckedEvent)} == {k: defaults[k] for k in typed}


def _real_chrome_traces() -> list[Path]:
    if not SHARED_TRACES.is_dir():
        return []
    found = [p for p in sorted(SHARED_TRACES.rglob("*.json")) if p.stat().st_size < 20 * 2**20]
    return [p for p in found if looks_like_chrome(p.read_bytes()[:65536])]


@pytest.mark.skipif(not _real_chrome_traces(), reason="the shared real traces are not here")
def test_the_check_refuses_exactly_what_msgspec_does_not_read_straight() -> None:
    """On every real trace: refusal() is None exactly when the msgspec path decodes it into Events as it
    stands (no mistyped event, no error) and, if an array, it has its closing `]` (the DuckDB path needs
    it), so well-formed files keep the DuckDB path."""
    odd = []
    for path in _real_chrome_traces():
        data = path.read_bytes()
        try:
            straight = decode_events(data, path.name)[2] == 0
        except ExplorerError:
            straight = False
        closed = data.lstrip()[:1] == b"{" or data.rstrip().endswith(b"]")
        if (straight and closed) != (refusal(data) is None):
            odd.append(f"{path.name}: msgspec straight={straight}, refusal={refusal(data)}")
    assert odd == []
