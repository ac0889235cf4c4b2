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
from explorer.ingest import chrome_fast
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import collect_inputs

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
# booleans are left to test_a_boolean_time_is_no_number: the DuckDB path reads `true` as 1 (known, below)
_junk = st.sampled_from([('"abc"', None), ('""', None), ("null", None), ("[1]", None), ('{"a": 1}', None)])
TIMES = st.one_of(_numbers, _numbers, _strings, _junk)

EVENT = st.fixed_dictionaries({
    "ph": st.sampled_from(["X", "X", "X", "B", "E", "i", "C", "s", "f", "M"]),
    "ts": st.one_of(TIMES, st.none()),  # None: the key is left out
    "dur": st.one_of(TIMES, st.none()),
    "tid": st.integers(min_value=0, max_value=3),
    "name": st.text(max_size=8),
})


def _event_json(ev: dict[str, Any], i: int) -> str:
    parts = [f'"ph": "{ev["ph"]}"', f'"name": {json.dumps(ev["name"])}', '"pid": 1', f'"tid": {ev["tid"]}']
    if ev["ts"] is not None:
        parts.append(f'"ts": {ev["ts"][0]}')
    if ev["dur"] is not None:
        parts.append(f'"dur": {ev["dur"][0]}')
    if ev["ph"] == "C":
        parts.append(f'"args": {{"v": {i}}}')
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


def expected_slices(events: list[dict[str, Any]]) -> Counter[tuple[int, int]]:
    out: Counter[tuple[int, int]] = Counter()
    stacks: dict[int, list[tuple[int, int, str]]] = {}
    begin_end = []
    for order, ev in enumerate(events):
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


@pytest.mark.parametrize("path_mode", ["msgspec", "duckdb"])
@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(events=st.lists(EVENT, max_size=25), wrapped=st.booleans())
def test_generated_documents(events: list[dict[str, Any]], wrapped: bool, path_mode: str, workdir: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chrome_fast, "FAST_MIN_BYTES", 0 if path_mode == "duckdb" else 8 * 2**20)
    body = "[" + ", ".join(_event_json(ev, i) for i, ev in enumerate(events)) + "]"
    doc = '{"traceEvents": ' + body + ', "displayTimeUnit": "ns"}' if wrapped else body
    path = workdir / FILE
    path.write_text(doc)
    expected = expected_slices(events)
    try:
        stored = _ingest(path, workdir)
    except ExplorerError as exc:
        assert "\n" not in exc.message and exc.message.startswith(FILE), exc.message
        assert not expected, f"{exc.message} but {sum(expected.values())} slices were storable"
        return
    assert stored == expected, doc
    assert list(workdir.glob("ingest-*")) == []  # the scratch folder is gone


@pytest.mark.parametrize("path_mode", [
    "msgspec",
    pytest.param("duckdb", marks=pytest.mark.xfail(strict=True, reason=(
        "found by this test: DuckDB's read_json casts a JSON true to DECIMAL 1, so the fast path keeps an "
        "event the msgspec path drops as mistyped; fixing it needs ts/dur read as JSON in chrome_fast's SQL"))),
])
def test_a_boolean_time_is_no_number(path_mode: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chrome_fast, "FAST_MIN_BYTES", 0 if path_mode == "duckdb" else 8 * 2**20)
    path = workdir / FILE
    path.write_text('[{"ph": "X", "name": "a", "pid": 1, "tid": 0, "ts": 0, "dur": 0},'
                    ' {"ph": "X", "name": "b", "pid": 1, "tid": 0, "ts": 0, "dur": true}]')
    assert _ingest(path, workdir) == Counter({(0, 0): 1})
