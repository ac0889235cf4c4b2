"""The DuckDB path's check decodes a big file piece by piece (explorer.ingest.chrome.json_check.pieces): it must answer
exactly as one decode of the whole file does, wherever the pieces are cut and whatever a piece holds."""

from __future__ import annotations

import json
import mmap
from pathlib import Path

import pytest

from explorer.ingest.chrome import json_check
from explorer.ingest.chrome.json_check import check_file, pieces, refusal


def _event(i: int, extra: str = "") -> str:
    return (f'{{"ph": "X", "name": "op{i}", "cat": "cpu_op", "ts": {i}.5, "dur": 1, "pid": 1, "tid": 1, '
            f'"args": {{"External id": {i}{extra}}}}}')


def _array(events: list[str], sep: str = ",\n") -> str:
    return "[\n" + sep.join(events) + "\n]\n"


def _doc(events: list[str], sep: str = ",\n", after: str = "") -> str:
    """Kineto's layout: arrays of objects before the events, plain values after them."""
    return ('{"schemaVersion": 1, "deviceProperties": [{"id": 0}], "traceEvents": [\n' + sep.join(events)
            + '\n], "traceName": "x"' + after + ', "baseTimeNanoseconds": 1700000000000000000}\n')


EVENTS = [_event(i) for i in range(300)]
BAD = {
    "NaN in a middle event": 150, "a trailing comma inside an event": 151, "ts true": 152,
}


def _with(events: list[str], i: int, what: str) -> list[str]:
    changed = list(events)
    if what == "NaN in a middle event":
        changed[i] = changed[i].replace('"dur": 1', '"dur": NaN')
    elif what == "a trailing comma inside an event":
        changed[i] = changed[i].replace('"pid": 1,', '"pid": 1,,')
    else:
        changed[i] = changed[i].replace('"ts": ', '"ts": true, "x": ')
    return changed


CASES = {
    "valid array": _array(EVENTS),
    "valid document": _doc(EVENTS),
    "compact separators": _doc(EVENTS, sep=","),
    "nested objects in args (cuts inside events)": _doc([_event(i, ', "l": [{"a": 1}, {"b": "},{"}]')
                                                         for i in range(300)]),
    "braces and commas inside strings": _doc([e.replace('"op', '"}, {op') for e in EVENTS]),
    "a trailing comma after the last event": _doc(EVENTS).replace("\n], \"traceName\"", ",\n], \"traceName\""),
    "NaN after the array": _doc(EVENTS).replace('"traceName": "x"', '"traceName": NaN'),
    "an empty array": _doc([]),
    "an array of objects after the events": _doc(EVENTS, after=', "logs": [{"a": [1]}]'),
    **{f"document, {what}": _doc(_with(EVENTS, i, what)) for what, i in BAD.items()},
    **{f"array, {what}": _array(_with(EVENTS, i, what)) for what, i in BAD.items()},
    "the last event cut short": _array(EVENTS)[:-20] + "]",
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_pieces_answer_as_the_whole_file(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json_check, "PIECE_BYTES", 997)  # many pieces, cut wherever 997 bytes fall
    path = tmp_path / "trace.json"
    path.write_text(CASES[name])
    assert check_file(path) == refusal(path.read_bytes())


def test_a_valid_file_is_checked_in_pieces_between_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json_check, "PIECE_BYTES", 997)
    path = tmp_path / "trace.json"
    path.write_text(CASES["valid document"])
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        cut = pieces(m)
        assert cut is not None
        wrapper, spans = cut
        assert json.loads(wrapper)["traceEvents"] == [] and json.loads(wrapper)["traceName"] == "x"
        assert len(spans) > 10
        joined = [e for lo, hi in spans for e in json.loads(b"[" + m[lo:hi] + b"]")]
    assert joined == json.loads(CASES["valid document"])["traceEvents"]


def test_a_refused_piece_gives_the_whole_files_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json_check, "PIECE_BYTES", 997)
    path = tmp_path / "trace.json"
    path.write_text(CASES["document, NaN in a middle event"])
    why = check_file(path)
    assert why is not None and why == refusal(path.read_bytes())
