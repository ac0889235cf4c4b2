"""hypothesis-generated Chrome/Kineto documents through the ingest pipeline, on both Chrome parser paths.

Documents are written as JSON text by hand, so that times are the exact decimal literals generated (ints,
decimals, exponent forms, numeric strings, junk). The expected slices are computed here independently:
a complete event (X) with a usable ts and dur, and each B matched with an E on its thread (a stack, in
time order), with ts/dur = the decimal µs value * 1000 rounded half away from zero, kept when
0 <= ns < 2**62. The ingest must store exactly those (ts_ns, dur_ns) pairs, or, only when nothing is
storable, fail with a one-line error naming the file.
"""

from __future__ import annotations

import json
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.errors import ExplorerError
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import collect_inputs
from tests.helpers.parsers import PATHS, WITH_PIECES, use_parser

LIMIT_NS = 2**62
FILE = "gen.json"

# time literals: (JSON text, the decimal µs value it means or None when it is no usable number; null is as
# if the key were absent)
_ints = st.integers(min_value=-(10**3), max_value=10**13).map(lambda i: (str(i), Decimal(i)))
_fracs = st.tuples(st.integers(min_value=0, max_value=10**10), st.integers(min_value=0, max_value=10**6 - 1),
                   st.integers(min_value=1, max_value=6)).map(
    lambda t: (f"{t[0]}.{t[1] % 10**t[2]:0{t[2]}d}", Decimal(f"{t[0]}.{t[1] % 10**t[2]:0{t[2]}d}")))
_exps = st.tuples(st.integers(min_value=1, max_value=9999), st.integers(min_value=-4, max_value=8)).map(
    lambda t: (f"{t[0]}e{t[1]}", Decimal(f"{t[0]}e{t[1]}")))
_huge = st.sampled_from([(str(2**62), Decimal(2**62)), ("4611686018427387.904", Decimal("4611686018427387.904")),
                         ("4611686018427387.9035", Decimal("4611686018427387.9035")), ("-0", Decimal(0)),
                         ("0.0005", Decimal("0.0005")), ("0.0004999", Decimal("0.0004999"))])
_numbers = st.one_of(_ints, _fracs, _exps, _huge)
_strings = _numbers.map(lambda n: (json.dumps(n[0]), n[1]))  # the same numbers as JSON strings
# values of the wrong JSON type: the event is dropped as mistyped, whatever its phase (`true` is no 1)
_junk = st.sampled_from([('"abc"', None), ('""', None), ("null", None), ("[1]", None), ('{"a": 1}', None),
                         ("true", None), ("false", None)])
TIMES = st.one_of(_numbers, _numbers, _strings, _junk)
# texts JSON does not allow, spliced in at one place of a document: the whole file is refused as not JSON
NOT_JSON = ("NaN", "Infinity", "-Infinity", "[1,]", '{"a": 1,}')
BREAK = st.one_of(st.none(), st.none(), st.tuples(st.sampled_from(NOT_JSON), st.integers(min_value=0, max_value=24),
                                                  st.sampled_from(["ts", "dur", "pid", "tid", "args", "extra"])))

EVENT = st.fixed_dictionaries({
    "ph": st.sampled_from(["X", "X", "X", "B", "E", "i", "C", "s", "f", "M"]),
    "ts": st.one_of(TIMES, st.none()),  # None: the key is left out
    "dur": st.one_of(TIMES, st.none()),
    "tid": st.integers(min_value=0, max_value=3),
    "name": st.text(max_size=8),
})


def _event_json(ev: dict[str, Any], i: int, broken: tuple[str, str] | None = None) -> str:
    """One event as JSON text; `broken` = (text, field): that field's value is the text instead."""
    values = {"pid": "1", "tid": str(ev["tid"])}
    if ev["ts"] is not None:
        values["ts"] = ev["ts"][0]
    if ev["dur"] is not None:
        values["dur"] = ev["dur"][0]
    if ev["ph"] == "C":
        values["args"] = f'{{"v": {i}}}'
    if broken is not None:
        values[broken[1]] = broken[0]
    parts = [f'"ph": "{ev["ph"]}"', f'"name": {json.dumps(ev["name"])}'] + [f'"{k}": {v}' for k, v in values.items()]
    if ev["ph"] in ("s", "f"):
        parts.append(f'"id": {i % 3}, "cat": "flow"')
    if ev["ph"] == "M":
        parts.append(f'"args": {{"name": "thread {i}"}}')
    return "{" + ", ".join(parts) + "}"


def _ns(t: tuple[str, Decimal | None] | None, missing: int | None = None) -> int | None:
    if t is None or t[0] == "null":  # JSON null is an absent value (a missing dur is 0)
        return missing
    if t[1] is None:
        return None
    try:
        ns = int((t[1] * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    except InvalidOperation:
        return None
    return ns if 0 <= ns < LIMIT_NS else None


def _mistyped(t: tuple[str, Decimal | None] | None) -> bool:
    """A time that is no number at all (not merely out of range): the msgspec types refuse the event."""
    return t is not None and t[1] is None and t[0] != "null"


def expected_slices(events: list[dict[str, Any]]) -> Counter[tuple[int, int]]:
    out: Counter[tuple[int, int]] = Counter()
    stacks: dict[int, list[tuple[int, int, str]]] = {}
    begin_end = []
    for order, ev in enumerate(events):
        if _mistyped(ev["ts"]) or _mistyped(ev["dur"]):
            continue
        ts = _ns(ev["ts"])
        if ev["ph"] == "X":
            dur = _ns(ev["dur"], missing=0)
            if ts is not None and dur is not None and ts + dur < LIMIT_NS:
                out[(ts, dur)] += 1
        elif ev["ph"] in ("B", "E") and ts is not None:
            begin_end.append((ts, order, ev))
    for ts, _order, ev in sorted(begin_end, key=lambda x: (x[0], x[1])):
        stack = stacks.setdefault(ev["tid"], [])
        if ev["ph"] == "B":
            stack.append((ts, 0, ""))
        elif stack:
            start = stack.pop()[0]
            out[(start, ts - start)] += 1
    return out


def _ingest(path: Path, scratch: Path) -> Counter[tuple[int, int]]:
    inputs = collect_inputs([path], scratch_root=scratch)
    try:
        trace = ingest_inputs(inputs)
    finally:
        inputs.cleanup()
    slices = trace.tables["slices"]
    return Counter(zip(slices.column("ts_ns").to_pylist(), slices.column("dur_ns").to_pylist(), strict=True))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hypothesis")


@pytest.mark.parametrize("path_mode", WITH_PIECES)  # pieces: cut wherever events meet (tests/helpers/parsers.py)
@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(events=st.lists(EVENT, max_size=25), wrapped=st.booleans(), broken=BREAK)
def test_generated_documents(events: list[dict[str, Any]], wrapped: bool, broken: tuple[str, int, str] | None,
                             path_mode: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_parser(monkeypatch, path_mode)
    at = broken[1] % len(events) if broken and events else -1
    body = "[" + ", ".join(_event_json(ev, i, (broken[0], broken[2]) if broken and i == at else None)
                           for i, ev in enumerate(events)) + "]"
    doc = '{"traceEvents": ' + body + ', "displayTimeUnit": "ns"}' if wrapped else body
    path = workdir / FILE
    path.write_text(doc)
    expected = expected_slices(events)
    try:
        stored = _ingest(path, workdir)
    except ExplorerError as exc:
        assert "\n" not in exc.message and exc.message.startswith(FILE), exc.message
        if at >= 0:  # the same refusal on both paths, whatever else the file holds
            assert exc.message.startswith(f"{FILE}: not valid JSON (JSON is malformed: "), exc.message
            return
        assert not expected, f"{exc.message} but {sum(expected.values())} slices were storable"
        return
    assert at < 0, f"{broken} in the document, yet it was read:\n{doc}"
    assert stored == expected, doc
    assert list(workdir.glob("ingest-*")) == []  # the scratch folder is gone


@pytest.mark.parametrize("path_mode", PATHS)  # DuckDB's read_json alone would read true as 1
def test_a_boolean_time_is_no_number(path_mode: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_parser(monkeypatch, path_mode)
    path = workdir / FILE
    path.write_text('[{"ph": "X", "name": "a", "pid": 1, "tid": 0, "ts": 0, "dur": 0},'
                    ' {"ph": "X", "name": "b", "pid": 1, "tid": 0, "ts": 0, "dur": true}]')
    assert _ingest(path, workdir) == Counter({(0, 0): 1})
