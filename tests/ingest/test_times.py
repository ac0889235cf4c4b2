"""Exact integer nanoseconds from every form a trace writes its times in: both Chrome parser paths, real
traces, Neuron files. Expected values come from decimal arithmetic on the file's text (never from the
parser), and every case first shows that a float64 reading of its value would be off."""

from __future__ import annotations

import gzip
import json
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import collect_inputs
from explorer.ingest.times import MAX_TS_NS, US_DECIMAL, decimal_column_ns, to_ns, us_to_ns
from explorer.model.tables import IngestedTrace
from tests.helpers.parsers import CHECK, PATHS, use_parser

HTA = "HolisticTraceAnalysis/tests/data"


def exact_ns(us: int | Decimal | str, base_ns: int = 0) -> int:
    """µs -> ns by decimal arithmetic, rounded half away from zero."""
    with localcontext() as ctx:
        ctx.prec = 80
        return int((Decimal(us) * 1000).to_integral_value(rounding=ROUND_HALF_UP)) + base_ns


def float_ns(us: int | Decimal | str, base_ns: int = 0) -> int:
    """What a float64 reading gives (the parsers before exact times): each case must differ from it."""
    return round(float(us) * 1000.0) + base_ns


def ingest_file(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parser: str,
                to_duckdb: bool = False) -> IngestedTrace:
    """Ingest one file through one parser path (tests/helpers/parsers.py), with no fallback allowed from the compiled
    reader or DuckDB's (`to_duckdb`: the compiled reader may refuse the file, which then takes DuckDB's)."""
    use_parser(monkeypatch, parser, strict=True)
    if to_duckdb:  # the compiled reader may refuse it; DuckDB's path may not
        monkeypatch.setattr(chrome_fast, "_Check", CHECK)
    return ingest_path(path, tmp_path)


def ingest_path(path: Path, tmp_path: Path, text: str | None = None) -> IngestedTrace:
    """Ingest one file (written from `text` first, when given) as the upload and CLI paths do."""
    if text is not None:
        path.write_text(text)
    inputs = collect_inputs([path], scratch_root=tmp_path)
    try:
        return ingest_inputs(inputs)
    finally:
        inputs.cleanup()


def ingest_text(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parser: str,
                to_duckdb: bool = False) -> IngestedTrace:
    path = tmp_path / f"{parser}.json"
    path.write_text(text)
    return ingest_file(path, tmp_path, monkeypatch, parser, to_duckdb)


def warnings_of(trace: IngestedTrace) -> dict[str, int]:
    return {w.code: w.count for w in trace.warnings}


# ---- one case per form a time is written in ---------------------------------------------------------

@dataclass(frozen=True)
class Form:
    """A parent X event at `ts` (JSON text, µs) and a child 2 µs later that ends exactly where it ends."""

    ts: str
    write: Callable[[Decimal], str] = str  # how this form writes the child's ts
    base_ns: int = 0
    unit: str = ""

    def value(self) -> Decimal:
        return decimal_of(self.ts)

    def doc(self) -> str:
        child = self.write(self.value() + 2)
        head = [f'"baseTimeNanoseconds": {self.base_ns}'] if self.base_ns else []
        head += [f'"displayTimeUnit": "{self.unit}"'] if self.unit else []
        return "{" + ", ".join([*head, '"traceEvents": ['
                                '{"ph": "X", "name": "parent", "pid": 1, "tid": 1, "ts": ' + self.ts + ', "dur": 5},'
                                '{"ph": "X", "name": "child", "pid": 1, "tid": 1, "ts": ' + child + ', "dur": 3}]'
                                ]) + "}"


def decimal_of(token: str) -> Decimal:
    """The exact value of a JSON number or numeric-string token."""
    return Decimal(token[1:-1] if token.startswith('"') else token)


def quoted(d: Decimal) -> str:
    return f'"{d}"'


FORMS = {
    "relative_3_decimals": Form("9876543210123.457", base_ns=1_700_000_000_000_000_000),
    "absolute_integer_us": Form("1661203462598738"),
    "absolute_3_decimals": Form("1694128201425394.123"),
    "display_unit_ns": Form("1712195495519689.047", unit="ns"),  # ts stays µs per the Chrome spec
    "ns_float_rounds_up": Form("1712195495519689.0475"),  # half a ns: away from zero
    "ns_float_rounds_down": Form("1712195495519689.0464999"),
    "numeric_string": Form('"1694128201425394.123"', write=quoted),
    "exponent": Form("1.694128201425394123e15", write=lambda d: f"{d:e}"),
}


@pytest.mark.parametrize("parser", PATHS)
@pytest.mark.parametrize("form", FORMS.values(), ids=list(FORMS))
def test_every_time_form_is_exact(form: Form, parser: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ts = form.value()
    assert float_ns(ts, form.base_ns) != exact_ns(ts, form.base_ns)  # a float reading would fail here
    # a time written as text: the compiled reader leaves the file to DuckDB's
    trace = ingest_text(form.doc(), tmp_path, monkeypatch, parser, to_duckdb=form is FORMS["numeric_string"])
    s = {r["name"]: r for r in trace.tables["slices"].to_pylist()}
    assert (s["parent"]["ts_ns"], s["parent"]["dur_ns"]) == (exact_ns(ts, form.base_ns), 5_000)
    assert (s["child"]["ts_ns"], s["child"]["dur_ns"]) == (exact_ns(ts + 2, form.base_ns), 3_000)
    # the child ends exactly where its parent ends: it nests, no overlap sub-row
    assert s["child"]["parent_id"] == s["parent"]["slice_id"]
    assert "overlap" not in warnings_of(trace)


@pytest.mark.parametrize(("us", "base_ns", "ns"), [
    ("0.0005", 0, 1), ("0.0004999", 0, 0), ("-0.0005", 10, 9), ("12", 0, 12_000), (" 7.5 ", 0, 7_500),
    ("1e999", 0, None), ("-1", 0, None), ("abc", 0, None), ("NaN", 0, None), ("1_000", 0, None),
    (str(MAX_TS_NS // 1000), 0, MAX_TS_NS // 1000 * 1000), (str(MAX_TS_NS // 1000 + 1), 0, None),
])
def test_helper_rounds_half_away_from_zero_and_checks_range(us: str, base_ns: int, ns: int | None) -> None:
    assert us_to_ns(us, base_ns) == ns
    if ns is not None:
        assert us_to_ns(Decimal(us), base_ns) == ns == exact_ns(us, base_ns)


COLUMN_VALUES = ["0", "1712195495519689.047", None, "-0.001", "99999999999999999999999999999999.999",
                 "-4611686018427387.904", "4611686018427387.903", "1.5"]


@pytest.mark.parametrize("base_ns", [0, 10, 1_700_000_000_000_000_000, MAX_TS_NS + 5, -MAX_TS_NS - 1])
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_decimal_column_matches_the_scalar_rule(base_ns: int, offset: int) -> None:
    """The int128 words of a (sliced, nullable) DECIMAL(38,3) column give what the scalar rule gives."""
    column = pa.array([None if v is None else Decimal(v) for v in COLUMN_VALUES], US_DECIMAL).slice(offset)
    ns, ok = decimal_column_ns(column, base_ns)
    want = [None if v is None else exact_ns(v, base_ns) for v in COLUMN_VALUES[offset:]]
    want = [w if w is not None and 0 <= w < MAX_TS_NS else None for w in want]
    assert [int(n) if k else None for n, k in zip(ns.tolist(), ok.tolist(), strict=True)] == want
    assert want == [us_to_ns(v, base_ns) for v in COLUMN_VALUES[offset:]]


def test_helper_refuses_binary_floats_for_ns() -> None:
    assert to_ns(1712195495519689047.0) is None
    assert to_ns(Decimal("1712195495519689047.5")) == 1712195495519689048
    assert to_ns(True) is None and to_ns("1712195495519689047") == 1712195495519689047


# ---- the same generated file through both parser paths ---------------------------------------------

def _token(rng: random.Random, us: Decimal) -> str:
    """The value written the way some writer would: integer, 3 or more decimals, string or exponent."""
    style = rng.randrange(5)
    if style == 0:
        return str(us.to_integral_value())
    if style == 1:
        return f'"{us}"'
    if style == 2:
        return f"{us:e}"
    return str(us)


def generated_trace(seed: int = 9, threads: int = 3, tops: int = 60) -> tuple[str, list[tuple[str, Decimal, Decimal]]]:
    """Nested X events at epoch magnitude with ns-resolution times, B/E pairs and flows across threads;
    returns the JSON text and (name, ts µs, dur µs) of every X event as written."""
    rng = random.Random(seed)
    events: list[str] = []
    written: list[tuple[str, Decimal, Decimal]] = []

    def x(name: str, tid: int, ts: Decimal, dur: Decimal, depth: int, pid: int = 1) -> None:
        ts_text, dur_text = _token(rng, ts), _token(rng, dur)
        events.append(f'{{"ph": "X", "name": "{name}", "pid": {pid}, "tid": {tid}, "ts": {ts_text}, "dur": {dur_text}}}')
        written.append((name, decimal_of(ts_text), decimal_of(dur_text)))
        if depth < 3:
            at = ts
            for k in range(rng.randrange(3)):
                gap = Decimal(rng.randrange(0, 2000)) / 1000
                child = Decimal(rng.randrange(1, 30_000)) / 10_000
                if at + gap + child > ts + dur:
                    break
                x(f"{name}.{k}", tid, at + gap, child, depth + 1)
                at += gap + child

    start = Decimal("1712195495519689.0475")
    for tid in range(1, threads + 1):
        at = start + tid
        for i in range(tops):
            dur = Decimal(rng.randrange(50_000, 90_000)) / 10_000
            x(f"t{tid}.op{i}", tid, at, dur, 0)
            events.append(f'{{"ph": "B", "name": "b{tid}.{i}", "pid": 2, "tid": {tid}, "ts": {_token(rng, at)}}}')
            events.append(f'{{"ph": "E", "pid": 2, "tid": {tid}, "ts": {_token(rng, at + dur)}}}')
            events.append(f'{{"ph": "s", "cat": "ac2g", "id": {tid * 1000 + i}, "pid": 1, "tid": {tid}, '
                          f'"ts": {_token(rng, at)}}}')
            events.append(f'{{"ph": "f", "cat": "ac2g", "id": {tid * 1000 + i}, "pid": 3, "tid": 7, "bp": "e", '
                          f'"ts": {_token(rng, at + 1)}}}')
            x(f"kernel{tid}.{i}", 7, at + 1, Decimal("0.5"), 3, pid=3)
            at += dur + Decimal(rng.randrange(1, 1000)) / 1000
    rng.shuffle(events)
    return '{"traceEvents": [\n' + ",\n".join(events) + "\n]}", written


def comparable(trace: IngestedTrace) -> dict[str, list[tuple[Any, ...]]]:
    cols = {"slices": ["slice_id", "track_id", "name", "ts_ns", "dur_ns", "depth", "parent_id"],
            "flows": ["from_slice", "to_slice", "kind"], "instants": ["ts_ns", "name"]}
    out = {}
    for name, columns in cols.items():
        table = trace.tables[name].select(columns)
        out[name] = sorted(zip(*(table.column(c).to_pylist() for c in columns), strict=True))
    return out


def test_both_paths_give_identical_integer_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text, written = generated_trace()
    monkeypatch.setattr(chrome_fast, "BATCH_ROWS", 37)  # nesting, pairs and flows across batch borders
    runs = {p: ingest_text(text, tmp_path, monkeypatch, p) for p in PATHS}
    assert comparable(runs["msgspec"]) == comparable(runs["duckdb"]) == comparable(runs["native"])
    assert warnings_of(runs["msgspec"]) == warnings_of(runs["duckdb"]) == warnings_of(runs["native"])
    stored = {(r["name"], r["ts_ns"], r["dur_ns"]) for r in runs["duckdb"].tables["slices"].to_pylist()}
    expected = {(name, exact_ns(ts), exact_ns(dur)) for name, ts, dur in written}
    assert expected <= stored
    assert any(float_ns(ts) != exact_ns(ts) for _n, ts, _d in written)
    assert len(comparable(runs["duckdb"])["flows"]) == 180


def test_both_paths_give_the_same_warning_words_for_events_they_drop(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """X events and flow steps are counted columnar on the DuckDB path, one by one on the other: the
    warnings (code, message, count) must not tell which path read the file."""
    text = json.dumps({"traceEvents": [
        {"ph": "X", "name": "ok", "pid": 1, "tid": 1, "ts": 1, "dur": 5},
        {"ph": "X", "name": "early", "pid": 1, "tid": 1, "ts": -2, "dur": 1},
        {"ph": "X", "name": "no time", "pid": 1, "tid": 1, "dur": 1},
        {"ph": "s", "cat": "ac2g", "name": "no id", "pid": 1, "tid": 1, "ts": 2},
        {"ph": "f", "cat": "ac2g", "name": "early", "id": 3, "pid": 1, "tid": 1, "ts": -4},
        {"ph": "f", "cat": "ac2g", "name": "no id", "pid": 1, "tid": 1, "ts": 3},
        {"ph": "t", "cat": "ac2g", "name": "no id", "pid": 1, "tid": 1, "ts": 3},
    ]})
    monkeypatch.setattr(chrome_fast, "BATCH_ROWS", 2)
    words = {p: sorted((w.code, w.message, w.count) for w in ingest_text(text, tmp_path, monkeypatch, p).warnings)
             for p in PATHS}
    assert words["msgspec"] == words["duckdb"] == words["native"]
    assert [(code, count) for code, _m, count in words["duckdb"]] == [
        ("bad_time", 2), ("unknown_event", 2), ("unknown_event", 1), ("unknown_event", 1)]
    assert [m for code, m, _c in words["duckdb"] if code == "unknown_event"] == [
        "flow event without id or time (f)", "flow event without id or time (s)", "flow event without id or time (t)"]


def test_fast_path_falls_back_cleanly_on_values_duckdb_cannot_cast(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    text = ('{"traceEvents": [{"ph": "X", "name": "ok", "pid": 1, "tid": 1, "ts": 1694128201425394.123, "dur": 2},'
            '{"ph": "X", "name": "huge", "pid": 1, "tid": 1, "ts": 1e999, "dur": 1},'
            '{"ph": "X", "name": "text", "pid": 1, "tid": 1, "ts": "abc", "dur": 1}]}')
    monkeypatch.setattr(chrome_fast, "FAST_MIN_BYTES", 0)
    trace = ingest_path(tmp_path / "odd.json", tmp_path, text)
    rows = [(r["name"], r["ts_ns"]) for r in trace.tables["slices"].to_pylist()]
    assert rows == [("ok", exact_ns("1694128201425394.123"))]
    assert warnings_of(trace) == {"mistyped_event": 1, "bad_time": 1}


@pytest.mark.parametrize("parser", PATHS)
@pytest.mark.parametrize("base", ["1700000000000000000", "1.7e18", "1700000000000000000.4"])
def test_mistyped_event_takes_the_loose_path_and_stays_exact(base: str, parser: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """One event with a non-numeric ts sends the whole file event by event; times, base and args stay exact."""
    text = ('{"baseTimeNanoseconds": ' + base + ', "traceEvents": ['
            '{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 9876543210123.457, "dur": 1.5, '
            '"args": {"ratio": 0.1000000000000000055511151231257827}},'
            '{"ph": "X", "name": "bad", "pid": 1, "tid": 1, "ts": "abc", "dur": 1}]}')
    trace = ingest_text(text, tmp_path, monkeypatch, "msgspec") if parser == "msgspec" else \
        _ingest_allowing_fallback(text, tmp_path, monkeypatch)
    [row] = trace.tables["slices"].to_pylist()
    base_ns = int(Decimal(base).to_integral_value(rounding=ROUND_HALF_UP))
    assert (row["ts_ns"], row["dur_ns"]) == (exact_ns("9876543210123.457", base_ns), 1_500)
    assert json.loads(row["args"], parse_float=Decimal) == {"ratio": Decimal("0.1000000000000000055511151231257827")}
    assert warnings_of(trace) == {"mistyped_event": 1}


def _ingest_allowing_fallback(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> IngestedTrace:
    monkeypatch.setattr(chrome_fast, "FAST_MIN_BYTES", 0)
    return ingest_path(tmp_path / "fallback.json", tmp_path, text)


# ---- real traces --------------------------------------------------------------------------------------

def x_events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def overlaps(events: list[dict[str, Any]]) -> tuple[int, int]:
    """(pairs of X events on one thread that overlap without one containing the other, slices the nesting
    rule moves to a sub-row), by exact decimal times. The rule: in start order (longer first), a slice that
    starts inside a slice kept on the main row and ends after it moves off; the rest nest."""
    spans: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        start = exact_ns(e["ts"])
        spans[(str(e["pid"]), str(e["tid"]))].append((start, start + exact_ns(e.get("dur", 0))))
    pairs = moved = 0
    for items in spans.values():
        items.sort(key=lambda s: (s[0], s[0] - s[1]))
        for i, (start, end) in enumerate(items):
            j = i + 1
            while j < len(items) and items[j][0] < end:
                pairs += items[j][0] > start and items[j][1] > end
                j += 1
        kept_ends: list[int] = []
        for start, end in items:
            while kept_ends and kept_ends[-1] <= start:
                kept_ends.pop()
            if kept_ends and kept_ends[-1] < end:
                moved += 1
            else:
                kept_ends.append(end)
    return pairs, moved


# (true partial-overlap pairs, slices moved) by exact times: control 0/0, test 26/24, ns_resolution 0/0;
# float64 readings gave 6451, 4038 and 766 "overlap" slices
REAL = {
    "trace_diff_control": f"{HTA}/trace_diff/control/control.json.gz",
    "trace_diff_test": f"{HTA}/trace_diff/test/test.json.gz",
    "ns_resolution": f"{HTA}/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
}


@pytest.mark.shared
@pytest.mark.parametrize("rel", REAL.values(), ids=list(REAL))
def test_real_trace_overlaps_and_times_are_exact(rel: str, shared_traces: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = shared_traces / rel
    events = x_events(path)
    pairs, moved = overlaps(events)
    assert moved <= pairs and (moved == 0) == (pairs == 0)  # only true partial overlaps move slices
    trace = ingest_file(path, tmp_path, monkeypatch, "native")  # each is over 8 MB raw
    assert warnings_of(trace).get("overlap", 0) == moved
    tracks = trace.tables["tracks"].to_pylist()
    assert sum(t["count"] for t in tracks if "(overlap" in t["label"]) == moved
    stored = {(r["name"], r["ts_ns"], r["dur_ns"]) for r in trace.tables["slices"].to_pylist()}
    sample = events[::97]
    expected = {(e["name"], exact_ns(e["ts"]), exact_ns(e.get("dur", 0))) for e in sample}
    assert expected <= stored
    assert sum(float_ns(e["ts"]) != exact_ns(e["ts"]) for e in sample) > len(sample) // 2


@pytest.mark.shared
def test_real_ns_resolution_trace_same_on_both_paths(shared_traces: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = shared_traces / REAL["ns_resolution"]
    runs = {p: comparable(ingest_file(path, tmp_path, monkeypatch, p)) for p in PATHS}
    assert runs["msgspec"] == runs["duckdb"] == runs["native"]


# ---- Neuron ----------------------------------------------------------------------------------------------

EPOCH_NS = "1712195495519689047.0"  # a JSON float literal; float64 holds ...689216


def ingest_neuron(tmp_path: Path, name: str, doc_text: str) -> IngestedTrace:
    return ingest_path(tmp_path / name, tmp_path, doc_text)


NEURON_JSON = {
    "json_export": '{"trace_event": [{"name": "nrt_execute", "trace_event_source": "neuron_rt", "timestamp": '
                   + EPOCH_NS + ', "duration": 1500.0, "nc_idx": 0, "process_id": 5}]}',
    "profile2": '{"trace_events": [{"id": 1, "name": "nrt_execute", "group": "nrt-nc-0", "type": 1, "timestamp": '
                + EPOCH_NS + ', "duration": 1.5e3, "process_id": 5}]}',
    "nrt_records": '{"data_version": 2, "events": ['
                   '{"event_type": "nrt_execute", "phase": "start", "tracking_id": 1, "nc_idx": 0, "timestamp_ns": '
                   + EPOCH_NS + '}, {"event_type": "nrt_execute", "phase": "stop", "tracking_id": 1, "nc_idx": 0, '
                   '"timestamp_ns": 1712195495519690547.0}]}',
}


@pytest.mark.parametrize("text", NEURON_JSON.values(), ids=list(NEURON_JSON))
def test_neuron_json_epoch_ns_float_literal_is_exact(text: str, tmp_path: Path) -> None:
    want = int(Decimal(EPOCH_NS))
    assert int(float(EPOCH_NS)) != want
    trace = ingest_neuron(tmp_path, "neuron.json", text)
    [row] = trace.tables["slices"].to_pylist()
    assert (row["ts_ns"], row["dur_ns"]) == (want, 1500)


def test_neuron_parquet_times_stay_integers_and_float_columns_warn(tmp_path: Path) -> None:
    start = 1712195495519689047
    base = {"name": ["nrt_execute"], "trace_event_source": ["neuron_rt"], "nc_idx": [0], "process_id": [5]}
    pq.write_table(pa.table({**base, "start_ts": pa.array([start], pa.int64()),
                             "duration_ns": pa.array([1500], pa.int64())}), tmp_path / "ints.parquet")
    [row] = _parquet_rows(tmp_path / "ints.parquet", tmp_path)
    assert (row["ts_ns"], row["dur_ns"]) == (start, 1500)
    floating = pa.array([float(start)], pa.float64())
    pq.write_table(pa.table({**base, "start_ts": floating, "duration_ns": pa.array([1500], pa.int64())}),
                   tmp_path / "floats.parquet")
    [row], codes = _parquet_rows(tmp_path / "floats.parquet", tmp_path, with_warnings=True)
    assert row["ts_ns"] == int(Decimal(repr(float(start))))  # the float's shortest decimal text
    assert "float_time_column" in codes


def _parquet_rows(path: Path, tmp_path: Path, with_warnings: bool = False) -> Any:
    inputs = collect_inputs([path], scratch_root=tmp_path)
    try:
        trace = ingest_inputs(inputs)
    finally:
        inputs.cleanup()
    rows = trace.tables["slices"].to_pylist()
    return (rows, warnings_of(trace)) if with_warnings else rows
