"""The compiled events reader (explorer/ingest/chrome/_kscan.c through explorer.ingest.chrome.kscan), read directly and
through the ingest.

Checked: every column it gives, against values worked out here from the file's text (Python's json module,
decimal arithmetic: never the reader's own output): escapes and raw UTF-8 in text, every form a time is
written in (rounded half away from zero at the ns), ids as integers or text, the Kineto args (External id
and its 2021 spelling, correlation), Input Dims and args byte for byte, the defaults of missing fields;
the same columns as the DuckDB path's SELECT on one varied file (Input Dims and args: the same JSON, DuckDB
writes them again); what it refuses (one line saying why and at which byte of the file); batches by rows
and by text capacity; and, through the ingest, the same run on every parser path (one text per shape
however Input Dims are written, a cut inside an event, negative Kineto ids).
"""

from __future__ import annotations

import json
import logging
import mmap
import re
from decimal import ROUND_HALF_UP, Decimal, localcontext
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.chrome import kscan
from explorer.ingest.limits import IngestLimits
from explorer.ingest.pipeline import ingest_inputs
from explorer.ingest.sources import collect_inputs
from explorer.ingest.times import US_DECIMAL
from explorer.model.tables import IngestedTrace
from tests.helpers.parsers import PATHS, use_parser

COLUMNS = ("ph", "name", "cat", "ts", "dur", "pid", "tid", "id", "id2", "bp", "s", "scope", "ext", "corr", "dims",
           "args")


@pytest.fixture(autouse=True)
def built() -> None:
    """The library is part of the install (hatch_build.py): its absence fails here rather than skipping."""
    assert kscan._LIB is not None, f"{kscan.LIBRARY} is not built or not loadable (python hatch_build.py builds it)"


# ---- reading a document directly ------------------------------------------------------------------------

def doc(*events: str) -> str:
    """A Kineto-style document around the events' JSON text (metadata before and after the array)."""
    return '{"schemaVersion": 1, "traceEvents": [\n  ' + ",\n  ".join(events) + '\n], "displayTimeUnit": "ms"}'


def read_batches(path: Path, rows: int = 3) -> list[pa.RecordBatch]:
    """The reader's batches over the file's events array, found as chrome_fast._read_native finds it."""
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        open_at, close_at, _meta = chrome_fast._events_span(m)
        found = chrome_fast._WHITESPACE.match(m, open_at + 1, close_at)
        assert found is not None
        return list(kscan.read(m, found.end(), close_at, rows))


def read_doc(tmp_path: Path, text: str | bytes, rows: int = 3) -> pa.Table:
    """The document written to a file and read with `rows` rows a batch, as one table."""
    path = tmp_path / "trace.json"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    batches = read_batches(path, rows)
    assert all(b.num_rows <= rows for b in batches)
    table = pa.Table.from_batches(batches)
    assert table.column_names == list(COLUMNS)
    return table


def exact_ns(us: str) -> int:
    """µs text (a JSON number, or one in quotes) -> ns by decimal arithmetic, rounded half away from zero."""
    with localcontext() as ctx:
        ctx.prec = 80
        return int((Decimal(us.strip('"')) * 1000).to_integral_value(rounding=ROUND_HALF_UP))


def ns_of(column: pa.ChunkedArray) -> list[int | None]:
    """A DECIMAL(38,3) µs column's values as integer ns (None where null)."""
    assert column.type == US_DECIMAL
    return [None if v is None else int(v.scaleb(3)) for v in column.to_pylist()]


# ---- values read exactly ------------------------------------------------------------------------------

TEXTS = [
    r'"plain"', r'"quote \" backslash \\ slash \/"', r'"line\nbreak\ttab\r\b\f"', r'"\u00e9t\u00E9"',
    r'"smile \ud83d\ude00"', r'"nul \u0000 inside"', '"raw é 日本語 😀"', r'""', r'"\u20ac and € side by side"',
]


def test_text_is_decoded_as_json_decodes_it(tmp_path: Path) -> None:
    """Escapes (a surrogate pair and NUL among them) and raw multi-byte UTF-8 in ph, name, cat, bp, s and
    scope: each the string Python's json module reads, whatever batch it lands in."""
    fields = ("ph", "name", "cat", "bp", "s", "scope")
    events = ["{" + ", ".join(f'"{f}": {TEXTS[(i + k) % len(TEXTS)]}' for k, f in enumerate(fields)) + "}"
              for i in range(len(TEXTS))]
    table = read_doc(tmp_path, doc(*events))
    for f in fields:
        assert table.column(f).to_pylist() == [json.loads(e)[f] for e in events], f


TIMES = [
    "0", "7", "-7", "1.5", "1.234", "1.2345", "1.2335", "12.3456789", "0.0005", "0.0004999", "-0.0005", "-0.0004",
    "-12.5", "1.5e3", "2E-4", "5e-4", "5E-5", "1E+2", "0.5e-3", "123456789.123456789e2", "0e9999",
    "0.000000000000000000000001", '"7.5"', '"-3"', '"1e3"', '"0.0005"', '"-1712195495519689.0475"', "1661203462598738", "1712195495519689.0475",
    "1712195495519689.0464999", "4611686018427387.904", "8999999999999999.9994",
]


def test_times_are_exact_ns_rounded_half_away_from_zero(tmp_path: Path) -> None:
    """ts and dur in every form a trace writes them (numeric text among them) are the decimal value in ns,
    rounded half away from zero; absent, they are null (the SELECT's null, not 0)."""
    durs = TIMES[1:] + TIMES[:1]  # not the ts of the same event: a swapped column would show
    events = [f'{{"ph": "X", "ts": {ts}, "dur": {dur}}}' for ts, dur in zip(TIMES, durs, strict=True)]
    events += ['{"ph": "X", "dur": 1}', '{"ph": "i", "ts": 1}']
    table = read_doc(tmp_path, doc(*events))
    assert ns_of(table.column("ts")) == [*map(exact_ns, TIMES), None, 1000]
    assert ns_of(table.column("dur")) == [*map(exact_ns, durs), 1000, None]
    # the epoch-size case is the one a float64 reading gets wrong
    assert round(float("1712195495519689.0475") * 1000) != exact_ns("1712195495519689.0475")


def test_pid_tid_and_id_are_the_integer_or_the_text(tmp_path: Path) -> None:
    """pid and tid: an integer's digits or a string's text, "0" when absent; id likewise, null when absent."""
    values = ["1", "-3", "123456789012345678", '"gpu 0"', '"7"', r'"stream \"7\""', '""', None]
    events = []
    for i, value in enumerate(values):
        fields = [f'"{name}": {v}' for name, v in (("pid", value), ("tid", values[-1 - i]), ("id", value))
                  if v is not None]
        events.append("{" + ", ".join(fields) + "}")
    table = read_doc(tmp_path, doc(*events))

    def text(v: str | None, default: str | None) -> str | None:
        if v is None:
            return default
        decoded = json.loads(v)
        return decoded if isinstance(decoded, str) else str(decoded)

    assert table.column("pid").to_pylist() == [text(v, "0") for v in values]
    assert table.column("tid").to_pylist() == [text(v, "0") for v in reversed(values)]
    assert table.column("id").to_pylist() == [text(v, None) for v in values]
    assert table.column("id").null_count == 1


KINETO_ARGS = [
    '{"External id": 5, "correlation": 9}',
    '{"external id": 6}',
    '{"external id": 6, "External id": 7}',
    '{"External id": 8, "external id": 6, "correlation": 0}',
    '{"External id": -4, "correlation": -2}',
    '{"nested": {"External id": 3, "correlation": 4}, "list": [{"correlation": 1}]}',
    '{"name": "External id", "text": "\\"correlation\\": 3"}',
    '{}',
    None,
]


def test_kineto_ids_come_from_the_args_top_level(tmp_path: Path) -> None:
    """ext: "External id", else the 2021 spelling "external id" (in whatever order the object has them);
    corr: "correlation"; -1 when absent; only the args' own keys count (not nested ones, not text)."""
    events = ['{"ph": "X"' + ("" if a is None else f', "args": {a}') + "}" for a in KINETO_ARGS]
    table = read_doc(tmp_path, doc(*events))
    parsed = [json.loads(a) if a is not None else {} for a in KINETO_ARGS]
    assert table.column("ext").to_pylist() == [a.get("External id", a.get("external id", -1)) for a in parsed]
    assert table.column("corr").to_pylist() == [a.get("correlation", -1) for a in parsed]
    assert table.column("ext").to_pylist()[2:4] == [7, 8]  # the precedence, either order


DIMS = [
    '[[5, 3, 224, 224], [], ["a b"]]',
    "[[5,3,224,224],[],[\"a b\"]]",
    "[\n      [1, 2],\n\t[3]\r\n    ]",
    '[[-1, -0], ["é", "\\u00e9 \\" \\\\"], [true, false, null], {"k": [2], "k": [3]}]',
    "[[1, 2.50], [1e3, -2E-1]]",
    "[ ]",
    '"text"',
]


def test_input_dims_are_the_raw_text(tmp_path: Path) -> None:
    """Input Dims: the value's text exactly as written (spacing, escapes, floats and all; the ingest writes
    it one way for every path, see test_input_dims_give_the_same_shapes_on_every_path); "" when absent, and
    only the args' own "Input Dims" counts."""
    events = ['{"ph": "X", "args": {"a": 1, "Input Dims": ' + d + ', "b": [1, 2]}}' for d in DIMS]
    events += ['{"ph": "X", "args": {"input dims": [1], "x": {"Input Dims": [2]}}}', '{"ph": "X"}']
    table = read_doc(tmp_path, doc(*events))
    assert table.column("dims").to_pylist() == [*DIMS, "", ""]


ARGS = [
    '{}', '{ }', '{"a": 1}', '{\n    "a" : [1, 2, {"b": null}],\n\t"c": "x y"\n  }',
    r'{"esc": "\u00e9 \" \\ \/", "raw": "é 😀"}', '{"f": 1.5e-3, "n": -0, "big": 123456789012345678901234567890}',
    '{"deep": ' + "[" * 40 + "]" * 40 + "}",
]


def test_args_are_the_raw_text_byte_for_byte(tmp_path: Path) -> None:
    """args: the object exactly as the file writes it (spaces, newlines, escapes left as escapes); "{}" for
    an event without args."""
    events = ['{"ph": "X", "args": ' + a + ', "name": "after"}' for a in ARGS] + ['{"ph": "X"}']
    table = read_doc(tmp_path, doc(*events))
    assert table.column("args").to_pylist() == [*ARGS, "{}"]
    assert table.column("name").to_pylist() == ["after"] * len(ARGS) + [""]


def test_missing_fields_take_the_selects_defaults(tmp_path: Path) -> None:
    """An empty event, and one with only fields no column reads: the SELECT's coalesce() defaults."""
    table = read_doc(tmp_path, doc("{}", '{"unknown": [1, {"ts": 5}], "tts": 3, "args2": {}}'))
    empty = {"ph": "", "name": "", "cat": "", "ts": None, "dur": None, "pid": "0", "tid": "0", "id": None, "id2": "",
             "bp": "", "s": "", "scope": "", "ext": -1, "corr": -1, "dims": "", "args": "{}"}
    assert table.to_pylist() == [empty, empty]


# ---- the same columns as DuckDB's ---------------------------------------------------------------------

VARIED = [
    '{"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "python"}}',
    '{"ph": "M", "name": "thread_name", "pid": "7", "tid": "main thread", "args": {"name": "main"}}',
    '{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 7, "tid": 7, "ts": 10.0, "dur": 20.0,'
    ' "args": {"External id": 1, "Input Dims": [[4, 8], [8, 8]], "Input type": ["float", "float"]}}',
    '{"ph": "X", "cat": "cpu_op", "name": "aten::add\\u005f", "pid": 7, "tid": 7, "ts": "11.0004", "dur": 1.5e1,'
    ' "args": {"external id": 2, "Sequence number": 4}}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": 12.0005,'
    ' "dur": 4, "args": {"External id": 2, "correlation": 99, "cbid": 211}}',
    '{"ph": "X", "cat": "kernel", "name": "sgemm \\"tn\\" é", "pid": 0, "tid": 7, "ts": 1712195495519689.0475,'
    ' "dur": 5.5, "args": {"External id": 2, "correlation": 99, "stream": 7, "grid": [1, 2, 3]}}',
    '{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 99, "pid": 7, "tid": 7, "ts": 12.0}',
    '{"ph": "f", "cat": "ac2g", "name": "ac2g", "id": "0x63", "pid": 0, "tid": 7, "ts": 30, "bp": "e"}',
    '{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 7, "tid": 7, "ts": 13.0, "s": "t",'
    ' "args": {"Total Allocated": 1024, "Bytes": -512}}',
    '{"ph": "b", "cat": "async", "name": "req", "id": -12, "pid": -1, "tid": -2, "ts": -5, "scope": "net"}',
    '{"ph": "C", "name": "mem", "pid": 1, "ts": 2E2, "args": {"used": 1.25, "free": 7}}',
    '{"ph": "X", "name": "no times", "args": {"Input Dims": "scalar", "External id": 0, "correlation": 0}}',
    '{"ph": "X", "name": "long", "ts": 8999999999999999.9996, "dur": -0.0006,'
    ' "args": {"Input Dims": [[1], [\n 2 ]], "x": {"y": [[], {}]}}}',
    "{}",
]


def test_columns_are_duckdbs(tmp_path: Path) -> None:
    """On a file both read, every column is the DuckDB path's (chrome_fast._open_events: its SELECT) but args,
    which DuckDB writes again in its own spacing: the same JSON there."""
    path = tmp_path / "trace.json"
    path.write_text(doc(*VARIED))
    ours = pa.Table.from_batches(read_batches(path, rows=4))
    with chrome_fast._open_events(path, tmp_path, 256, threads=1) as (reader, _meta):
        duck = reader.read_all()
    assert duck.num_rows == ours.num_rows == len(VARIED)
    assert duck.column_names == ours.column_names
    for name in COLUMNS:
        assert ours.column(name).type == duck.column(name).type, name
        if name not in ("args", "dims"):
            assert ours.column(name).to_pylist() == duck.column(name).to_pylist(), name
    for name in ("args", "dims"):
        assert [json.loads(a) if a else a for a in ours.column(name).to_pylist()] == \
            [json.loads(a) if a else a for a in duck.column(name).to_pylist()], name
    assert ours.column("args").to_pylist() == [_raw_value(e, "args", "{}") for e in VARIED]
    assert ours.column("dims").to_pylist() == [_raw_value(e, "Input Dims", "") for e in VARIED]


def _raw_value(event: str, key: str, default: str) -> str:
    """The text of the value after the first `"key": ` in an event's text, as written; `default` without."""
    at = event.find(f'"{key}": ')
    if at < 0:
        return default
    start = at + len(f'"{key}": ')
    _, end = json.JSONDecoder().raw_decode(event, start)
    return event[start:end]


# ---- refusals -----------------------------------------------------------------------------------------

GOOD = '{"ph": "X", "name": "good", "pid": 1, "tid": 1, "ts": 2, "dur": 3, "args": {"External id": 1}}'
# (case, the bad text put between two good events, a word of the reason)
REFUSED = [
    ("NaN ts", '{"ph": "X", "ts": NaN}', "number"),
    ("Infinity in args", '{"ph": "X", "ts": 1, "args": {"v": Infinity}}', "JSON value"),
    ("-Infinity dur", '{"ph": "X", "ts": 1, "dur": -Infinity}', "JSON value"),
    ("trailing comma in args", '{"ph": "X", "ts": 1, "args": {"v": 1,}}', "key"),
    ("trailing comma in an args array", '{"ph": "X", "ts": 1, "args": {"v": [1, 2,]}}', "JSON value"),
    ("trailing comma in an event", '{"ph": "X", "ts": 1,}', "key"),
    ("missing comma in an event", '{"ph": "X" "ts": 1}', "comma"),
    ("missing comma in args", '{"ph": "X", "args": {"a": 1 "b": 2}}', "comma"),
    ("missing comma between events", '{"ph": "X", "ts": 1} {"ph": "X", "ts": 2}', "comma"),
    ("invalid UTF-8 byte", b'{"ph": "X", "name": "caf\xe9"}', "UTF-8"),
    ("invalid UTF-8 in a key", b'{"ph": "X", "args": {"\xc0\xaf": 1}}', "UTF-8"),
    ("UTF-8 surrogate bytes", b'{"ph": "X", "name": "\xed\xa0\x80"}', "UTF-8"),
    ("lone high surrogate escape", r'{"ph": "X", "name": "\ud800"}', "surrogate"),
    ("lone low surrogate escape", r'{"ph": "X", "cat": "\udc00x"}', "surrogate"),
    ("high surrogate then no low", r'{"ph": "X", "name": "\ud83d\u0041"}', "surrogate"),
    ("bad escape", r'{"ph": "X", "name": "\x41"}', "escape"),
    ("raw tab in a string", '{"ph": "X", "name": "a\tb"}', "control"),
    ("raw newline in args text", '{"ph": "X", "args": {"v": "a\nb"}}', "control"),
    ("a string running into the next line", '{"ph": "X", "name": "abc}', "control"),
    ("key spelled with an escape", r'{"p\u0068": "X", "ts": 1}', "escape"),
    ("Kineto arg key spelled with an escape", r'{"ph": "X", "args": {"External\u0020id": 1}}', "escape"),
    ("duplicate ts", '{"ph": "X", "ts": 1, "dur": 2, "ts": 3}', "twice"),
    ("duplicate args", '{"ph": "X", "args": {}, "args": {}}', "twice"),
    ("duplicate External id", '{"ph": "X", "args": {"External id": 1, "External id": 2}}', "twice"),
    ("duplicate Input Dims", '{"ph": "X", "args": {"Input Dims": [], "Input Dims": [1]}}', "twice"),
    ("id2", '{"ph": "s", "ts": 1, "id2": {"local": "0x1"}}', "id2"),
    ("ts true", '{"ph": "X", "ts": true}', "number"),
    ("ts null", '{"ph": "X", "ts": null}', "number"),
    ("ts text", '{"ph": "X", "ts": "abc"}', "number"),
    ("ts text with a space", '{"ph": "X", "ts": "7.5 "}', "plain number"),
    ("ts text with an escape", r'{"ph": "X", "ts": "\u0037"}', "plain number"),
    ("ts text empty", '{"ph": "X", "ts": ""}', "JSON value"),
    ("pid 1.5", '{"ph": "X", "pid": 1.5}', "integer"),
    ("pid true", '{"ph": "X", "pid": true}', "number"),
    ("pid -0", '{"ph": "X", "pid": -0}', "-0"),
    ("a NUL in a tid", '{"ph": "X", "pid": 1, "tid": "1\\u0000"}', "NUL"),  # a thread is keyed by pid NUL tid
    ("tid 1e3", '{"ph": "X", "tid": 1e3}', "integer"),
    ("id past 18 digits", '{"ph": "s", "id": 1234567890123456789}', "integer"),
    ("External id as text", '{"ph": "X", "args": {"External id": "5"}}', "number"),
    ("correlation 1.0", '{"ph": "X", "args": {"correlation": 1.0}}', "integer"),
    ("name not text", '{"ph": "X", "name": 5}', "text"),
    ("args an array", '{"ph": "X", "args": [1, 2]}', "object"),
    ("args text", '{"ph": "X", "args": "{}"}', "object"),
    ("args null", '{"ph": "X", "args": null}', "object"),
    ("an event that is a number", "5", "object"),
    ("an event that is an array", '[{"ph": "X"}]', "object"),
    ("args nested past 64", '{"ph": "X", "args": {"v": ' + "[" * 64 + "]" * 64 + "}}", "nested"),
    ("ts past 9e15 µs", '{"ph": "X", "ts": 10000000000000000}', "9 * 10**15"),
    ("ts past 9e15 µs by exponent", '{"ph": "X", "ts": 9e15}', "9 * 10**15"),
    ("dur past 9e15 µs, negative", '{"ph": "X", "ts": 1, "dur": -9000000000000000.5}', "9 * 10**15"),
    ("ts with a 5-digit exponent", '{"ph": "X", "ts": 1e00001}', "exponent"),
    ("Input Dims not JSON", '{"ph": "X", "args": {"Input Dims": [[1, 2.]]}}', "digits after its point"),
    ("leading zero", '{"ph": "X", "ts": 01}', "comma"),
]


@pytest.mark.parametrize(("bad", "why"), [pytest.param(bad, why, id=case) for case, bad, why in REFUSED])
def test_refused_with_the_reason_and_the_byte(tmp_path: Path, bad: str | bytes, why: str) -> None:
    """What the reader does not read exactly as the msgspec path does is refused (the file then takes the
    other paths), in one line naming the reason and a byte of the bad event (file offsets, not the range's)."""
    before, after = doc(GOOD, "@@").encode().split(b"@@")
    bad_bytes = bad.encode() if isinstance(bad, str) else bad
    text = before + bad_bytes + b",\n  " + GOOD.encode() + after
    with pytest.raises(kscan.Refused) as refused:
        read_doc(tmp_path, text)
    message = str(refused.value)
    assert "\n" not in message
    assert why in message
    at = re.fullmatch(r".+ \(at byte (\d+)\)", message)
    assert at is not None, message
    assert len(before) <= int(at.group(1)) <= len(before) + len(bad_bytes), message


def test_the_refused_documents_read_without_their_bad_event(tmp_path: Path) -> None:
    """The events around each refused case are read: the refusals above are the bad text's doing."""
    table = read_doc(tmp_path, doc(GOOD, GOOD, GOOD, GOOD), rows=2)
    assert table.num_rows == 4 and set(table.column("ext").to_pylist()) == {1}


@pytest.mark.parametrize(("end", "why"), [(", ", "trailing comma after the last event"),
                                         (', {"ph": "X", "name": "abc}', "without its closing quote"),
                                         (', {"ph": "X", "args": {"a": [1, 2', "unclosed"),
                                         (', {"ph": "X", "ts": 1.', "digits after its point")])
def test_refused_at_the_end_of_a_bare_array(tmp_path: Path, end: str, why: str) -> None:
    """The array form (`[...]`, no object around it): what the range ends inside of is refused too."""
    text = "[" + GOOD + end + "]"
    with pytest.raises(kscan.Refused, match=re.escape(why) + r".* \(at byte (\d+)\)$") as refused:
        read_doc(tmp_path, text)
    assert len(GOOD) < int(re.findall(r"at byte (\d+)", str(refused.value))[0]) <= len(text) - 1


def test_nesting_up_to_the_limit_is_read(tmp_path: Path) -> None:
    """Values nested 62 deep under args (64 with the event and args objects) are read, one more is refused."""
    deep = '{"ph": "X", "args": {"v": ' + "[" * 62 + "]" * 62 + "}}"
    assert read_doc(tmp_path, doc(deep)).column("args").to_pylist() == [deep[len('{"ph": "X", "args": '):-1]]
    with pytest.raises(kscan.Refused, match="nested"):
        read_doc(tmp_path, doc(deep.replace("[", "[[", 1).replace("]", "]]", 1)))


# ---- batches -----------------------------------------------------------------------------------------

def many_events(n: int) -> list[str]:
    return [json.dumps({"ph": "X", "cat": "cpu_op", "name": f"op{i} é", "pid": i % 2, "tid": str(i % 3),
                        "ts": f"{i}.{i:04d}", "dur": i / 4, **({"id": i} if i % 5 else {}),
                        "args": {"External id": i, "correlation": i * 2 if i % 3 else None,
                                 "Input Dims": [[i, 2], []], "t": "x" * (i % 7)}})
            .replace('"correlation": null', '"c": null')
            for i in range(n)]


@pytest.mark.parametrize("rows", [1, 2, 7, 1000])
def test_batch_rows_do_not_change_the_table(tmp_path: Path, rows: int) -> None:
    """The same events whatever the rows a batch holds: every batch but the last is full, in file order."""
    events = many_events(40)
    path = tmp_path / "trace.json"
    path.write_text(doc(*events))
    batches = read_batches(path, rows)
    assert [b.num_rows for b in batches] == [rows] * (40 // rows) + ([40 % rows] if 40 % rows else [])
    table = pa.Table.from_batches(batches)
    whole = pa.Table.from_batches(read_batches(path, 40))
    assert table.equals(whole)
    assert table.column("name").to_pylist() == [json.loads(e)["name"] for e in events]
    assert ns_of(table.column("ts")) == [exact_ns(json.loads(e)["ts"]) for e in events]


def test_small_text_capacity_stops_early_and_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each text column holding at most 64 bytes a batch: the reader stops before the event that does not fit
    (FULL) and the next call goes on from it, so every event is there once, in order."""
    events = [json.dumps({"ph": "X", "name": f"n{i}", "ts": i, "args": {"External id": i, "t": "é" * (i % 4)}})
              for i in range(30)]
    path = tmp_path / "trace.json"
    path.write_text(doc(*events))
    whole = pa.Table.from_batches(read_batches(path, 1000))
    monkeypatch.setattr(kscan, "BATCH_BYTES", 64)
    batches = read_batches(path, 1000)
    assert len(batches) > 5
    for b in batches:
        assert b.num_rows >= 1
        assert all(len(b.column(c).buffers()[2] or b"") <= 64 for c in ("args", "name", "dims"))
    assert pa.Table.from_batches(batches).equals(whole)


def test_an_event_bigger_than_the_capacity_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One event whose args alone pass a column's capacity cannot be read at all: refused, saying so, at it."""
    monkeypatch.setattr(kscan, "BATCH_BYTES", 64)
    big = '{"ph": "X", "args": {"t": "' + "x" * 80 + '"}}'
    text = doc(GOOD.replace(', "args": {"External id": 1}', ""), big)
    with pytest.raises(kscan.Refused, match=r"larger than the read buffers \(at byte (\d+)\)") as refused:
        read_doc(tmp_path, text, rows=10)
    at = int(re.findall(r"at byte (\d+)", str(refused.value))[0])
    assert at == text.encode().index(big.encode())


# ---- through the ingest ------------------------------------------------------------------------------

def ingest(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parser: str) -> IngestedTrace:
    """The file through one parser path (tests/helpers/parsers.py), with no fallback from it: the compiled reader
    may not refuse it (DuckDB's path is not reached), neither fast path may hand it to msgspec."""
    use_parser(monkeypatch, parser, strict=True)
    inputs = collect_inputs([path], scratch_root=tmp_path)
    try:
        return ingest_inputs(inputs, limits=IngestLimits(parse_threads=2))
    finally:
        inputs.cleanup()


def tables_of(trace: IngestedTrace) -> dict[str, pa.Table]:
    """The run's tables, the slices with their args whether they were held or spilled."""
    slices = trace.tables["slices"]
    if "args" not in slices.column_names:
        slices = slices.append_column("args", trace.slice_args_of(np.arange(slices.num_rows)))
    return {**trace.tables, "slices": slices}


SHAPED = [
    ("aten::linear", "[[4, 8], [8, 8]]"), ("aten::linear", "[[4,8],[8,8]]"), ("aten::linear", "[\n [4, 8],\n [8, 16]\n]"),
    ("aten::cat", '[["a b", "c"], [], [2, -1]]'), ("aten::cat", None), ("aten::relu", "[ ]"),
    ("aten::relu", "[]"), ("aten::mul", "[[-0, 3]]"), ("aten::mul", "[[0,3]]"), ("aten::mul", "[[0, 3.0]]"),
    ("aten::mul", "[[1e3, 2.50]]"), ("aten::mul", '[["\\u00e9", "é"]]'), ("aten::mul", '[{"k": 1, "k": 2}]'),
]


def shapes_text(dims: str | None) -> str:
    """The one text of a shape on every path: Python's json.dumps of the value (torch's spelling), "" for none."""
    return "" if dims is None else json.dumps(json.loads(dims), ensure_ascii=False)


def test_input_dims_give_the_same_shapes_on_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Input Dims however written (spaces, line breaks, -0, floats, escapes, a repeated key): one text per
    shape on every path, so slices.shapes and op_stats_by_shape do not depend on a file's size or its
    writer's spacing."""
    events = [json.dumps({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5,
                          "args": {"External id": i + 1}})[:-2] + (f', "Input Dims": {dims}}}}}' if dims else "}}")
              for i, (name, dims) in enumerate(SHAPED)]
    path = tmp_path / "trace.json"
    path.write_text(doc(*events))
    expected = [shapes_text(d) for _, d in SHAPED]
    assert expected[:2] == ["[[4, 8], [8, 8]]"] * 2 and expected[7:9] == ["[[0, 3]]"] * 2
    results = {}
    for parser in PATHS:
        with monkeypatch.context() as patched:
            trace = ingest(path, tmp_path, patched, parser)
        assert trace.tables["slices"].sort_by("ts_ns").column("shapes").to_pylist() == expected, parser
        results[parser] = trace.tables["op_stats_by_shape"]
    keys = {(r["name"], r["input_shapes"]) for r in results["msgspec"].to_pylist()}
    assert keys == {(name, shape or "[]") for (name, _), shape in zip(SHAPED, expected, strict=True)}
    for parser in PATHS:
        assert results[parser].equals(results["msgspec"]), parser


def test_a_cut_inside_an_event_reads_the_file_as_one_piece(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Pieces cut at `},{` inside an args string: the piece holding the cut is refused, the compiled reader
    reads the array again as one piece (not DuckDB, not msgspec), and the run is the msgspec path's, args
    byte for byte."""
    events: list[dict[str, Any]] = []
    for i in range(60):
        events.append({"ph": "X", "cat": "cpu_op", "name": f"op{i % 4}", "pid": 1, "tid": 1, "ts": 100 * i,
                       "dur": 50, "args": {"External id": i + 1, "Input Dims": [[i, 3]]}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": 100 * i + 10, "dur": 5, "args": {"External id": i + 1, "correlation": 1000 + i}})
        events.append({"ph": "X", "cat": "kernel", "name": f"k{i % 3}", "pid": 0, "tid": 7, "ts": 100 * i + 20,
                       "dur": 30, "args": {"External id": i + 1, "correlation": 1000 + i}})
    events.insert(30, {"ph": "X", "cat": "user_annotation", "name": "tricky", "pid": 1, "tid": 9, "ts": 5,
                       "dur": 1, "args": {"note": "},{" * 3000}})
    events.append({"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 5, "pid": 1, "tid": 1, "ts": 120})
    events.append({"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 5, "pid": 1, "tid": 1, "ts": 4020, "bp": "e"})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    text = path.read_bytes()
    note = (text.index(b'"note": "'), text.index(b'"note": "') + len("},{") * 3000)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        open_at, close_at, _meta = chrome_fast._events_span(m)
        ranges = chrome_fast._event_ranges(m, open_at + 1, close_at, 1024)
    assert any(note[0] < lo < note[1] for lo, _ in ranges[1:])

    with monkeypatch.context() as patched:
        expected = tables_of(ingest(path, tmp_path, patched, "msgspec"))
    monkeypatch.setattr(chrome_fast, "NATIVE_PIECE_BYTES", 1024)
    with caplog.at_level(logging.INFO, logger=chrome_fast.__name__):
        got = tables_of(ingest(path, tmp_path, monkeypatch, "native"))
    messages = [r.message for r in caplog.records]
    assert any("read again as one piece" in m for m in messages), messages
    assert not any("not used" in m for m in messages), messages
    assert got["flows"].num_rows > 60
    for name in ("slices", "flows", "tracks", "op_stats", "op_stats_by_shape"):
        assert got[name].equals(expected[name]), name


def test_negative_kineto_ids_link_nothing_on_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A negative External id or correlation is no id (the msgspec path's reading): the op, its launch and
    its kernel carrying -3/-7 are not linked on any path, while the pair with real ids beside them is."""
    def trio(ext: int, corr: int, at: int, suffix: str) -> list[str]:
        return [json.dumps(e) for e in (
            {"ph": "X", "cat": "cpu_op", "name": f"op{suffix}", "pid": 1, "tid": 1, "ts": at, "dur": 50,
             "args": {"External id": ext}},
            {"ph": "X", "cat": "cuda_runtime", "name": f"launch{suffix}", "pid": 1, "tid": 1, "ts": at + 10,
             "dur": 5, "args": {"External id": ext, "correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": f"kernel{suffix}", "pid": 0, "tid": 7, "ts": at + 20, "dur": 30,
             "args": {"External id": ext, "correlation": corr}})]

    path = tmp_path / "trace.json"
    bare = json.dumps({"ph": "X", "cat": "kernel", "name": "no_ids", "pid": 0, "tid": 7, "ts": 500, "dur": 1})
    path.write_text(doc(*trio(-3, -7, 0, "_neg"), *trio(4, 9, 100, "_pos"), *trio(-3, -7, 200, "_neg2"), bare))
    flows: dict[str, pa.Table] = {}
    for parser in PATHS:
        with monkeypatch.context() as patched:
            trace = ingest(path, tmp_path, patched, parser)
        slices = {r["name"]: r for r in trace.tables["slices"].to_pylist()}
        assert slices["kernel_pos"]["op_id"] == slices["op_pos"]["slice_id"], parser
        no_ids = [slices["no_ids"][k] for k in ("external_id", "correlation")]
        for name in ("op_neg", "launch_neg", "kernel_neg", "op_neg2", "launch_neg2", "kernel_neg2"):
            assert [slices[name][k] for k in ("external_id", "correlation")] == no_ids, (parser, name)
        for name in ("kernel_neg", "kernel_neg2"):  # (a launch's op is also the op around it on its thread)
            assert slices[name]["op_id"] == slices["no_ids"]["op_id"] == -1, (parser, name)
        assert slices["kernel_pos"]["correlation"] == 9 and slices["kernel_pos"]["external_id"] == 4, parser
        flows[parser] = trace.tables["flows"]
        linked = {(r["from_slice"], r["to_slice"]) for r in flows[parser].to_pylist()}
        assert linked == {(slices["launch_pos"]["slice_id"], slices["kernel_pos"]["slice_id"])}, parser
    for parser in PATHS:
        assert flows[parser].equals(flows["msgspec"]), parser


@pytest.mark.parametrize("native_reader", [True, False])
def test_the_setting_decides_whether_the_compiled_reader_reads(native_reader: bool, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """EXPLORER_NATIVE_READER (Settings.native_reader, carried by IngestLimits): false reads big files with
    DuckDB's reader, as before the compiled one; the run is the same either way."""
    path = tmp_path / "trace.json"
    path.write_text(doc(*VARIED))
    monkeypatch.setattr(chrome_fast, "FAST_MIN_BYTES", 0)
    calls: list[int] = []
    read = kscan.read

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return read(*args, **kwargs)

    monkeypatch.setattr(kscan, "read", counted)
    inputs = collect_inputs([path], scratch_root=tmp_path)
    try:
        trace = ingest_inputs(inputs, limits=IngestLimits(native_reader=native_reader))
    finally:
        inputs.cleanup()
    assert bool(calls) is native_reader
    assert trace.tables["slices"].num_rows > 0


def test_the_setting_is_read_from_explorer_native_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    from explorer.config import Settings

    assert IngestLimits.from_settings(Settings()).native_reader is True
    monkeypatch.setenv("EXPLORER_NATIVE_READER", "false")
    assert IngestLimits.from_settings(Settings()).native_reader is False


# ---- an interrupt while pieces are read ------------------------------------------------------------------

UNWIND_CHILD = r"""
import json, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from explorer.ingest.chrome import fast as chrome_fast
from explorer.ingest.chrome import kscan

class Unwaited(ThreadPoolExecutor):
    # a pool that does not wait for its readers: what an interrupt landing while the pool starts a thread
    # leaves (the thread runs, the pool never learns of it)
    def shutdown(self, wait=True, *, cancel_futures=False):
        super().shutdown(wait=False, cancel_futures=cancel_futures)

def interrupt(reduced, spill):  # Ctrl-C as the first piece is fed
    raise KeyboardInterrupt

unwound, after = threading.Event(), []
one = kscan._one

def slow(base, lo, hi, rows):
    if lo > first:
        time.sleep(0.5)  # the later pieces are still being read when the read unwinds
    status, batch, nxt = one(base, lo, hi, rows)
    after.append([unwound.is_set(), batch.num_rows])
    return status, batch, nxt

chrome_fast.ThreadPoolExecutor, chrome_fast._spill, kscan._one = Unwaited, interrupt, slow
chrome_fast.NATIVE_PIECE_BYTES = 4096
path = Path(sys.argv[1])
first = path.read_bytes().index(b"[") + 1
try:
    chrome_fast._read_native(path, 1500, 2, None)
except KeyboardInterrupt:
    unwound.set()
for t in threading.enumerate():
    if t is not threading.current_thread():
        t.join()
print(json.dumps(after))
"""


def test_an_interrupt_never_unmaps_the_file_under_a_read(tmp_path: Path) -> None:
    """An interrupt (Ctrl-C, SIGTERM) that lands while the read pool starts a thread leaves a reader running
    that the pool does not wait for (CI saw the CLI ingest die of SIGSEGV on SIGTERM): the file's mapping
    stays valid until that read is over, and the read finishes. In a child process: a crash fails the test."""
    import subprocess
    import sys

    path = tmp_path / "trace.json"
    path.write_text(doc(*(f'{{"ph": "X", "name": "op{i}", "pid": 1, "tid": 1, "ts": {i}, "dur": 1}}'
                          for i in range(3000))))
    proc = subprocess.run([sys.executable, "-c", UNWIND_CHILD, str(path)], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).parents[3])
    assert proc.returncode == 0, proc.stderr
    reads = json.loads(proc.stdout)
    assert any(unwound and rows > 0 for unwound, rows in reads), reads  # a read ran on after the unwind
