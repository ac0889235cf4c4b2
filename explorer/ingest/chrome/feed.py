"""Decoded Chrome/Kineto events -> TraceBuilder calls, routed by a phase table (PHASE_RULES).

The table is data, not branches: each row is also a test row (tests/ingest/chrome/test_decode.py). Decoding
the file is not here (explorer.ingest.chrome.decode); times become ns only through explorer.ingest.times.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

from explorer.ingest.builder import TraceBuilder
from explorer.ingest.columns import NONE
from explorer.ingest.times import MAX_TS_NS, us_to_ns
from explorer.model.lanes import Lane

EMPTY_ARGS = msgspec.Raw(b"{}")
NO_RAW = msgspec.Raw(b"")


class Event(msgspec.Struct, omit_defaults=True, gc=False):
    ph: str = ""
    name: str = ""
    cat: str = ""
    ts: int | Decimal | None = None  # µs; integer literals stay int (fast), others decode exactly
    dur: int | Decimal | None = None
    pid: int | str = 0
    tid: int | str = 0
    id: int | str | None = None
    id2: msgspec.Raw = msgspec.Raw(b"")
    bp: str = ""
    s: str = ""
    scope: str = ""
    args: msgspec.Raw = EMPTY_ARGS


# Kineto args the slice columns read -> the names Kineto versions wrote them under, the first found wins.
# KinetoArgs decodes them here; chrome_fast builds its SQL from this table, so both paths read the same.
KINETO_ARG_NAMES: dict[str, tuple[str, ...]] = {
    "external_id": ("External id", "external id"),  # the second: 2021-era Kineto
    "correlation": ("correlation",),
    "input_dims": ("Input Dims",),
}


class KinetoArgs(msgspec.Struct, rename={
    "external_id": "External id", "external_id_2021": "external id", "correlation": "correlation",
    "input_dims": "Input Dims", "name": "name", "sort_index": "sort_index", "labels": "labels",
}):
    """The few args fields the model reads (KINETO_ARG_NAMES, and metadata's); the rest stays raw text."""

    external_id: int | None = None
    external_id_2021: int | None = None
    correlation: int | None = None
    input_dims: msgspec.Raw = NO_RAW
    name: str | None = None
    sort_index: int | None = None
    labels: str | None = None


@dataclass(frozen=True)
class PhaseRule:
    """Event phases (the `ph` letters) -> the Feeder step that takes them, and what they become."""

    phases: tuple[str, ...]
    step: str  # a Feeder method taking (order, event)
    becomes: str  # slices | instants | counters | flows | names: where a well-formed event ends up
    note: str = ""


PHASE_RULES: tuple[PhaseRule, ...] = (
    PhaseRule(("X",), "_complete", "slices", "complete event; the hot path, first"),
    PhaseRule(("B", "E"), "_begin_end", "slices", "paired per thread after the walk, in time order"),
    PhaseRule(("M",), "_metadata", "names", "process/thread names and sort indices, device labels"),
    PhaseRule(("i", "I", "R", "n", "O", "N", "D", "P"), "_instant", "instants",
              "instants, marks, object and sample events; Kineto's [memory] instants become counters"),
    PhaseRule(("C",), "_counter", "counters", "one series per numeric arg (`name.key` when several)"),
    PhaseRule(("s", "t", "f"), "_flow", "flows", "flow steps, bound to slices in finish()"),
    PhaseRule(("b", "e", "S", "T", "F", "p"), "_async", "slices",
              "async spans on an `async <cat>` track; steps and unclosed begins become instants"),
)
UNKNOWN_PHASE = "_unknown_phase"  # any other phase: warned, kept as an instant


@dataclass(frozen=True)
class BulkCounts:
    """What a columnar reader (chrome_fast) took from the file itself, so that the feeder's totals,
    format and warnings cover the whole file."""

    stored: int = 0
    bad_time: int = 0  # complete events with a missing, negative or out-of-range time
    kineto: bool = False  # some event carried a Kineto "External id"
    bad_flows: Mapping[str, int] = field(default_factory=dict)  # phase -> flow steps without id or time


@dataclass(frozen=True)
class Fed:
    """The outcome of feeding one file: how many events were stored and which dialect it was."""

    stored: int
    kineto: bool


class Feeder:
    """Walks decoded events once and routes each phase to the builder through PHASE_RULES."""

    def __init__(self, builder: TraceBuilder, src: int, filename: str, base_ns: int) -> None:
        self.b = builder
        self.src = src
        self.filename = filename
        self.base_ns = base_ns
        self._stored = 0
        self._kineto = False
        self._bad_time = 0
        self._odd: dict[str, int] = defaultdict(int)  # warning message -> count
        self._be_events: dict[int, list[tuple[int, int, Event]]] = defaultdict(list)
        self._async_open: dict[tuple[str, str, str], list[tuple[int, Event]]] = defaultdict(list)
        self._add_slice = builder.add_slice  # bound once: the complete-event step runs per event
        self._shapes: dict[bytes, str] = {}  # raw "Input Dims" -> shapes_text: few distinct values a file
        self._memory_series: dict[tuple[object, object], tuple[tuple[str, str], ...]] = {}  # see _memory
        self._thread = builder.thread
        self._steps: dict[str, Callable[[int, Event], None]] = {
            ph: getattr(self, rule.step) for rule in PHASE_RULES for ph in rule.phases}

    def ns(self, ts: int | Decimal | None) -> int:
        """µs -> ns with the file's base added; -1 when missing or out of range."""
        ns = us_to_ns(ts, self.base_ns)
        return -1 if ns is None else ns

    def feed(self, events: list[Event], bulk: BulkCounts | None = None) -> Fed:
        """Route every event, pair and close what spans several events, then warn once per kind."""
        if bulk is not None:
            self._take_bulk(bulk)
        steps = self._steps
        unknown = self._unknown_phase
        for order, ev in enumerate(events):
            steps.get(ev.ph, unknown)(order, ev)
        self._pair_begin_end()
        self._close_async()
        for msg, count in self._odd.items():
            self.b.warn("unknown_event", msg, count, self.filename)
        if self._bad_time:
            self.b.warn("bad_time", "events with a missing, negative, NaN or out-of-range time or duration (not stored)",
                        self._bad_time, self.filename)
        return Fed(self._stored, self._kineto)

    def _take_bulk(self, bulk: BulkCounts) -> None:
        self._stored += bulk.stored
        self._bad_time += bulk.bad_time
        self._kineto = self._kineto or bulk.kineto
        for ph, count in bulk.bad_flows.items():
            self._odd[_no_flow_id(ph)] += count

    # ---- one step per row of PHASE_RULES ------------------------------------------------------------

    def _complete(self, _order: int, ev: Event) -> None:
        ts_ns = us_to_ns(ev.ts, self.base_ns)
        dur_ns = 0 if ev.dur is None else us_to_ns(ev.dur)  # a missing dur is 0
        if ts_ns is None or dur_ns is None or ts_ns + dur_ns >= MAX_TS_NS:
            self._bad_time += 1
            return
        args = ev.args
        corr = ext = NONE
        shapes = ""
        if len(args) > 2:
            ka = _kineto_args(args)
            external_id = ka.external_id if ka.external_id is not None else ka.external_id_2021
            if external_id is not None:
                ext = _id(external_id)
                self._kineto = True
            if ka.correlation is not None:
                corr = _id(ka.correlation)
            if ka.input_dims:
                raw_dims = bytes(ka.input_dims)
                shapes = self._shapes.get(raw_dims) or self._shapes.setdefault(raw_dims, shapes_text(raw_dims))
        self._add_slice(self._thread(self.src, ev.pid, ev.tid), ev.cat, ev.name, ts_ns, dur_ns,
                        bytes(args).decode(), corr, ext, shapes)
        self._stored += 1

    def _begin_end(self, order: int, ev: Event) -> None:
        ts_ns = self.ns(ev.ts)
        if ts_ns < 0:
            self._bad_time += 1
            return
        self._be_events[self._thread(self.src, ev.pid, ev.tid)].append((ts_ns, order, ev))

    def _metadata(self, _order: int, ev: Event) -> None:
        ka = _kineto_args(ev.args)
        name = ev.name
        if name == "process_name" and ka.name is not None:
            self.b.set_process_name(self.src, ev.pid, ka.name)
        elif name == "thread_name" and ka.name is not None:
            self.b.set_thread_name(self.src, ev.pid, ev.tid, ka.name)
        elif name == "process_sort_index" and ka.sort_index is not None:
            self.b.set_process_sort(self.src, ev.pid, ka.sort_index)
        elif name == "thread_sort_index" and ka.sort_index is not None:
            self.b.set_thread_sort(self.src, ev.pid, ev.tid, ka.sort_index)
        elif name == "process_labels" and ka.labels is not None and ka.labels != "CPU":
            self.b.set_device(self.src, ev.pid, ka.labels)

    def _instant(self, _order: int, ev: Event) -> None:
        ts_ns = self.ns(ev.ts)
        if ts_ns < 0:
            self._bad_time += 1
            return
        self.b.add_instant(self._thread(self.src, ev.pid, ev.tid), ts_ns, ev.name, ev.cat or ev.ph,
                           bytes(ev.args).decode())  # ([memory] ones too: their Addr and Bytes, analysis/memory.py)
        if ev.name == "[memory]":
            self._memory(ev, ts_ns)  # (which counts it stored)
            return
        self._stored += 1

    def _counter(self, _order: int, ev: Event) -> None:
        ts_ns = self.ns(ev.ts)
        args = decode_args(ev.args)
        if ts_ns < 0 or not isinstance(args, dict):
            self._bad_time += ts_ns < 0
            return
        base = ev.name if ev.id is None else f"{ev.name} {ev.id}"
        for key, value in args.items():
            if (isinstance(value, int | float) and not isinstance(value, bool) and (number := _float(value)) is not None
                    and math.isfinite(number)):
                series = base if len(args) == 1 else f"{base}.{key}"
                self.b.add_counter(self.src, ev.pid, series, ts_ns, number)
        self._stored += 1

    def _flow(self, _order: int, ev: Event) -> None:
        ts_ns = self.ns(ev.ts)
        if ts_ns < 0 or ev.id is None:
            self._odd[_no_flow_id(ev.ph)] += 1
            return
        self.b.add_flow_point(self.src, str(ev.id), ev.cat, ev.ph, self._thread(self.src, ev.pid, ev.tid), ts_ns,
                              enclosing=ev.bp == "e" or ev.ph != "f")

    def _async(self, _order: int, ev: Event) -> None:
        ts_ns = self.ns(ev.ts)
        if ts_ns < 0:
            self._bad_time += 1
            return
        ident = str(ev.id) if ev.id is not None else bytes(ev.id2).decode()
        key = (ev.cat, ident, ev.name if ev.ph in ("S", "F", "T", "p") else "")
        if ev.ph in ("b", "S"):
            self._async_open[key].append((ts_ns, ev))
        elif ev.ph in ("e", "F"):
            opened = self._async_open.get(key) or self._async_open.get((ev.cat, ident, ""))
            if not opened:
                self._odd[f"async end events without a begin ({ev.ph})"] += 1
                return
            start_ns, begin = opened.pop()
            self._add_async(begin, start_ns, ts_ns)
        else:  # T / p steps: keep as instants on the async track
            self.b.add_instant(self._async_thread(ev), ts_ns, ev.name, ev.cat or ev.ph, bytes(ev.args).decode())
            self._stored += 1

    def _unknown_phase(self, order: int, ev: Event) -> None:
        self._odd[f"events with unknown phase {ev.ph!r} (kept as instants)"] += 1
        self._instant(order, ev)

    # ---- helpers of the steps ---------------------------------------------------------------------

    def _memory(self, ev: Event, ts_ns: int) -> None:
        args = decode_args(ev.args)
        if not isinstance(args, dict):
            return
        device = args.get("Device Type", 0), args.get("Device Id", -1)
        for key, name in self._series_of(*device):
            value = args.get(key)
            if isinstance(value, int | float) and (number := _float(value)) is not None:
                self.b.add_counter(self.src, ev.pid, name, ts_ns, number)
        self._stored += 1

    def add_memory(self, points: MemoryPoints) -> None:
        """[memory] instants a columnar reader took apart (memory_points): the counters _memory makes of them,
        a series at a time."""
        for (pid, device_type, device_id), totals in points.series.items():
            for (_key, name), (ts, values) in zip(self._series_of(device_type, device_id), totals, strict=True):
                self.b.add_counter_points(self.src, pid, name, ts, values)
        for pid, tid, cat, ts_ns, args in points.events:  # each also an instant, as the per-event path keeps it
            self.b.add_instant(self._thread(self.src, pid, tid), ts_ns, MEMORY_NAME, cat, args)
        self._stored += points.count

    def _series_of(self, device_type: object, device_id: object) -> tuple[tuple[str, str], ...]:
        device = device_type, device_id
        if type(device_type) in _KEYS and type(device_id) in _KEYS:  # few a file: their series' names made once
            series = self._memory_series.get(device)
            if series is None:
                series = self._memory_series[device] = _memory_series(*device)
            return series
        return _memory_series(*device)  # (True would find 1's names, 1.0 too; a list is no key)

    def _async_thread(self, ev: Event) -> int:
        track = f"async {ev.cat}".strip()
        self.b.set_thread_name(self.src, ev.pid, track, track)
        return self._thread(self.src, ev.pid, track)

    def _add_async(self, begin: Event, start_ns: int, end_ns: int) -> None:
        if end_ns < start_ns:
            self._odd["async spans that end before they begin"] += 1
            return
        self._add_slice(self._async_thread(begin), begin.cat, begin.name, start_ns, end_ns - start_ns,
                        bytes(begin.args).decode(), lane=Lane.OTHER)
        self._stored += 1

    def _close_async(self) -> None:
        left = sum(len(v) for v in self._async_open.values())
        if left:
            self.b.warn("unclosed_async", "async begin events without an end (kept as instants)", left,
                        self.filename)
            for opened in self._async_open.values():
                for ts_ns, ev in opened:
                    self.b.add_instant(self._async_thread(ev), ts_ns, ev.name, ev.cat or ev.ph,
                                       bytes(ev.args).decode())

    def _pair_begin_end(self) -> None:
        """Match E to the latest open B on its thread, in time order (stable for equal times)."""
        unmatched_end = unclosed = 0
        for thread, items in self._be_events.items():
            items.sort(key=lambda it: (it[0], it[1]))
            stack: list[tuple[int, Event]] = []
            for ts_ns, _order, ev in items:
                if ev.ph == "B":
                    stack.append((ts_ns, ev))
                elif stack:
                    start_ns, begin = stack.pop()
                    args = begin.args if len(ev.args) <= 2 else _merge_args(begin.args, ev.args)
                    self._add_slice(thread, begin.cat or ev.cat, begin.name or ev.name, start_ns,
                                    ts_ns - start_ns, bytes(args).decode())
                    self._stored += 1
                else:
                    unmatched_end += 1
            for ts_ns, begin in stack:
                unclosed += 1
                self._stored += 1
                self.b.add_instant(thread, ts_ns, begin.name, begin.cat or "B", bytes(begin.args).decode())
        if unmatched_end:
            self.b.warn("unmatched_end", "E events without a matching B (ignored)", unmatched_end, self.filename)
        if unclosed:
            self.b.warn("unclosed_begin", "B events without a matching E (kept as instants)", unclosed,
                        self.filename)


_ARGS = msgspec.json.Decoder(KinetoArgs, strict=False)
# args that DuckDB read (fast path) but msgspec cannot decode: odd types, nesting past msgspec's depth limit,
# escaped lone surrogates DuckDB turned into bytes that are not UTF-8
_UNREADABLE_ARGS = (msgspec.ValidationError, msgspec.DecodeError, RecursionError)
_ANY = msgspec.json.Decoder()


def shapes_text(raw: bytes) -> str:
    """Kineto's "Input Dims" as one text whichever parser path read the file and however its writer spaced
    it: as Python's json.dumps writes the value (`[[64, 512], [512]]`, non-ASCII kept), which is also how
    torch's key_averages shows input shapes. DuckDB's json_extract gives it compact, the others as written."""
    return json.dumps(_ANY.decode(raw), ensure_ascii=False)


def shapes_column(dims: pa.Array) -> pa.Array:
    """A column of "Input Dims" texts ("" where absent) through shapes_text, once per distinct value."""
    encoded = pc.dictionary_encode(dims)
    texts = [shapes_text(v.encode()) if v else "" for v in encoded.dictionary.to_pylist()]
    return pa.array(texts, pa.string()).take(encoded.indices)


_KEYS = (int, str)  # the device fields a [memory] instant's series are cached by (not True for 1, or 1.0)


def _memory_series(device_type: object, device_id: object) -> tuple[tuple[str, str], ...]:
    """A [memory] instant's counters, (its args' key, the series' name), for the device it names."""
    where = "CPU" if device_type == 0 else f"device {device_type}:{device_id}"
    return tuple((key, f"memory {label} ({where}) [bytes]")
                 for key, label in (("Total Allocated", "allocated"), ("Total Reserved", "reserved")))


def _float(value: int | float) -> float | None:
    """A counter's value as stored; None for an integer too large for a float (10**400 written out)."""
    try:
        return float(value)
    except OverflowError:
        return None


class _MemoryArgs(msgspec.Struct, gc=False):
    """The args of a [memory] instant as memory_points takes them apart: anything else (a bool or a float
    for a device field, a text total, args that are not an object) is left to the per-event _memory."""

    device_type: int | str = msgspec.field(name="Device Type", default=0)
    device_id: int | str = msgspec.field(name="Device Id", default=-1)
    allocated: int | float | None = msgspec.field(name="Total Allocated", default=None)
    reserved: int | float | None = msgspec.field(name="Total Reserved", default=None)


_MEMORY_ARGS = msgspec.json.Decoder(_MemoryArgs)
MEMORY_NAME = "[memory]"
INSTANT_PHASES = next(rule.phases for rule in PHASE_RULES if rule.step == "_instant")


Points = tuple[list[int], list[float]]  # a series' times (ns) and values


@dataclass
class MemoryPoints:
    """[memory] instants taken apart column-wise: per (pid, device type, device id), in file order, the points
    of its two totals (allocated, reserved) as Feeder._memory stores them."""

    series: dict[tuple[str, object, object], tuple[Points, Points]]
    count: int
    events: list[tuple[str, str, str, int, str]]  # (pid, tid, cat, ts_ns, args) of each point taken


def memory_points(pids: list[str], ts_ns: list[int], args: list[str], tids: list[str] | None = None,
                  cats: list[str | None] | None = None) -> tuple[MemoryPoints, list[int]]:
    """[memory] instants (their pid as text, their time in ns, their args as JSON text; their tid and category)
    as MemoryPoints, and the positions of those whose args this typed decoding does not take (for the
    per-event path)."""
    series: dict[tuple[str, object, object], tuple[Points, Points]] = {}
    left: list[int] = []
    events: list[tuple[str, str, str, int, str]] = []
    decode = _MEMORY_ARGS.decode
    for i, (pid, ts, raw) in enumerate(zip(pids, ts_ns, args, strict=True)):
        try:
            a = decode(raw)
        except _UNREADABLE_ARGS:
            left.append(i)
            continue
        if tids is not None:
            events.append((pid, tids[i], (cats[i] if cats else None) or "i", ts, raw))
        key = (pid, a.device_type, a.device_id)
        if (totals := series.get(key)) is None:
            totals = series[key] = (([], []), ([], []))
        for total, (times, values) in ((a.allocated, totals[0]), (a.reserved, totals[1])):
            if total is not None and (number := _float(total)) is not None:
                times.append(ts)
                values.append(number)
    return MemoryPoints(series, len(pids) - len(left), events), left


def decode_args(raw: msgspec.Raw | bytes | str) -> Any:
    """An event's args as Python values, or None where msgspec cannot read them (see _UNREADABLE_ARGS)."""
    try:
        return _ANY.decode(raw)
    except _UNREADABLE_ARGS:
        return None


def _no_flow_id(ph: str) -> str:
    """The one warning text for a flow step that cannot be placed, on both parser paths."""
    return f"flow event without id or time ({ph})"


def _kineto_args(raw: msgspec.Raw) -> KinetoArgs:
    if len(raw) <= 2:
        return KinetoArgs()
    try:
        return _ARGS.decode(raw)
    except _UNREADABLE_ARGS:
        return KinetoArgs()  # odd types in args: the raw text is still stored


def _id(value: int) -> int:
    return value if 0 <= value < 2**63 else NONE


def _merge_args(begin: msgspec.Raw, end: msgspec.Raw) -> msgspec.Raw:
    a = decode_args(begin)
    b = decode_args(end)
    if isinstance(a, dict) and isinstance(b, dict):
        return msgspec.Raw(msgspec.json.encode({**a, **b}))
    return begin
