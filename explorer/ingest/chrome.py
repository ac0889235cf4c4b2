"""Parser for the Chrome Trace Event Format and its Kineto dialect (`torch.profiler` trace.json).

Decodes with typed msgspec structs (args kept as raw JSON text), then feeds a TraceBuilder.
Files with wrongly typed events fall back to a tolerant per-event path that reports, not drops.
Times are decoded as int or Decimal, never float, and become ns only through explorer.ingest.times.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from decimal import Decimal
from typing import Any

import msgspec

from explorer.errors import BadTrace
from explorer.ingest.builder import NONE, TraceBuilder
from explorer.ingest.times import MAX_TS_NS, to_ns, us_to_ns
from explorer.model.lanes import Lane

log = logging.getLogger(__name__)

EMPTY_ARGS = msgspec.Raw(b"{}")
NO_RAW = msgspec.Raw(b"")


class Event(msgspec.Struct, omit_defaults=True):
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


class KinetoArgs(msgspec.Struct, rename={
    "external_id": "External id", "correlation": "correlation", "input_dims": "Input Dims",
    "name": "name", "sort_index": "sort_index", "labels": "labels",
}):
    """The few args fields the model reads; everything else stays in the raw args text."""

    external_id: int | None = None
    correlation: int | None = None
    input_dims: msgspec.Raw = NO_RAW
    name: str | None = None
    sort_index: int | None = None
    labels: str | None = None


class ObjectDoc(msgspec.Struct):
    traceEvents: list[Event] = []  # noqa: N815 - field names are the format's
    displayTimeUnit: str | None = None  # noqa: N815
    baseTimeNanoseconds: int | Decimal | None = None  # noqa: N815
    deviceProperties: msgspec.Raw = NO_RAW  # noqa: N815
    distributedInfo: msgspec.Raw = NO_RAW  # noqa: N815


class LooseDoc(msgspec.Struct):
    traceEvents: list[Any] = []  # noqa: N815
    baseTimeNanoseconds: int | Decimal | None = None  # noqa: N815
    deviceProperties: Any = None  # noqa: N815
    distributedInfo: Any = None  # noqa: N815


_DOC = msgspec.json.Decoder(ObjectDoc, strict=False)
_ARRAY = msgspec.json.Decoder(list[Event], strict=False)
_LOOSE = msgspec.json.Decoder(strict=False, float_hook=Decimal)
_RAW_ENCODER = msgspec.json.Encoder(decimal_format="number")  # Decimals from _LOOSE back as JSON numbers
_ARGS = msgspec.json.Decoder(KinetoArgs, strict=False)
_ANY = msgspec.json.Decoder()


def looks_like_chrome(head: bytes) -> bool:
    text = head.lstrip()[:4096]
    if text.startswith(b"["):
        return True
    return text.startswith(b"{") and (b'"traceEvents"' in head or b'"systemTraceEvents"' in head)


def decode_events(data: bytes, filename: str) -> tuple[list[Event], dict[str, Any], int]:
    """Events and document-level metadata; the third value counts events dropped as mistyped."""
    body = data.lstrip()
    if not body:
        raise BadTrace(filename, "the file is empty")
    is_array = body.startswith(b"[")
    if is_array:
        body = _close_array(body)
    try:
        if is_array:
            return _ARRAY.decode(body), {}, 0
        doc = _DOC.decode(body)
        return doc.traceEvents, _doc_meta(to_ns(doc.baseTimeNanoseconds), doc.deviceProperties,
                                          doc.distributedInfo, doc.displayTimeUnit), 0
    except msgspec.ValidationError:
        pass  # some event has unexpected types: go event by event below
    except msgspec.DecodeError as exc:
        raise BadTrace(filename, f"not valid JSON ({exc})") from None
    loose = _LOOSE.decode(body)
    if isinstance(loose, dict):
        raw_events = loose.get("traceEvents", [])
        meta = _doc_meta(to_ns(loose.get("baseTimeNanoseconds")), None, None, None)
    else:
        raw_events, meta = loose, {}
    if not isinstance(raw_events, list):
        raise BadTrace(filename, "'traceEvents' is not a list")
    events: list[Event] = []
    bad = 0
    for raw in raw_events:
        try:
            events.append(msgspec.convert(_rawify_args(raw), Event, strict=False))
        except (msgspec.ValidationError, TypeError):
            bad += 1
    return events, meta, bad


def _rawify_args(raw: Any) -> Any:
    """msgspec.convert cannot build Raw fields from Python objects: encode those fields first."""
    if isinstance(raw, dict):
        raw = dict(raw)
        for key in ("args", "id2"):
            if key in raw:
                raw[key] = msgspec.Raw(_RAW_ENCODER.encode(raw[key]))
    return raw


def _close_array(body: bytes) -> bytes:
    """The JSON Array Format may omit the closing bracket (and end with a comma)."""
    tail = body.rstrip()
    if tail.endswith(b"]"):
        return tail
    return tail.rstrip(b",").rstrip() + b"]"


def _doc_meta(base: int | None, devices: msgspec.Raw | None, dist: msgspec.Raw | None,
              unit: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"base_ns": base or 0}
    if devices:
        meta["device_properties"] = _ANY.decode(devices)
    if dist:
        meta["distributed_info"] = _ANY.decode(dist)
    if unit:
        meta["display_time_unit"] = unit
    return meta


def parse_chrome(data: bytes, filename: str, builder: TraceBuilder, instance: str = "") -> dict[str, Any]:
    """Decode one Chrome/Kineto trace file into the builder. Returns document metadata."""
    events, meta, mistyped = decode_events(data, filename)
    src = builder.add_source(filename, instance)
    if mistyped:
        builder.warn("mistyped_event", "events with fields of the wrong type (not stored)", mistyped, filename)
    if not events and not mistyped:
        raise BadTrace(filename, "the trace holds no events")
    feeder = _Feeder(builder, src, filename, int(meta.get("base_ns", 0)))
    feeder.feed(events)
    if feeder.stored == 0:
        problems = "; ".join(f"{w.count} {w.message}" for w in builder.warnings.values() if w.source == filename)
        raise BadTrace(filename, f"no usable events ({problems or 'only metadata'})")
    meta["format"] = "kineto" if feeder.kineto else "chrome"
    return meta


class _Feeder:
    """Walks decoded events once and routes each phase to the builder."""

    def __init__(self, builder: TraceBuilder, src: int, filename: str, base_ns: int) -> None:
        self.b = builder
        self.src = src
        self.filename = filename
        self.base_ns = base_ns
        self.stored = 0
        self.kineto = False
        self.bad_time = 0
        self.open_begins: dict[int, list[tuple[int, int, Event]]] = defaultdict(list)
        self.be_events: dict[int, list[tuple[int, int, Event]]] = defaultdict(list)
        self.async_open: dict[tuple[str, str, str], list[tuple[int, Event]]] = defaultdict(list)
        self.unknown: dict[str, int] = defaultdict(int)

    def ns(self, ts: int | Decimal | None) -> int:
        """µs -> ns with the file's base added; -1 when missing or out of range."""
        ns = us_to_ns(ts, self.base_ns)
        return -1 if ns is None else ns

    def feed(self, events: list[Event]) -> None:
        b = self.b
        src = self.src
        thread = b.thread
        add_slice = b.add_slice
        ns = self.ns
        for order, ev in enumerate(events):
            ph = ev.ph
            if ph == "X":
                ts_ns = ns(ev.ts)
                dur_ns = 0 if ev.dur is None else us_to_ns(ev.dur)  # a missing dur is 0
                if ts_ns < 0 or dur_ns is None or ts_ns + dur_ns >= MAX_TS_NS:
                    self.bad_time += 1
                    continue
                args = ev.args
                corr = ext = NONE
                shapes = ""
                if len(args) > 2:
                    ka = _kineto_args(args)
                    if ka.external_id is not None:
                        ext = _id(ka.external_id)
                        self.kineto = True
                    if ka.correlation is not None:
                        corr = _id(ka.correlation)
                    if ka.input_dims:
                        shapes = bytes(ka.input_dims).decode()
                add_slice(thread(src, ev.pid, ev.tid), ev.cat, ev.name, ts_ns, dur_ns,
                          bytes(args).decode(), corr, ext, shapes)
                self.stored += 1
            elif ph in ("B", "E"):
                ts_ns = ns(ev.ts)
                if ts_ns < 0:
                    self.bad_time += 1
                    continue
                self.be_events[thread(src, ev.pid, ev.tid)].append((ts_ns, order, ev))
            elif ph == "M":
                self._metadata(ev)
            elif ph in ("i", "I", "R", "n", "O", "N", "D", "P"):
                self._instant(ev)
            elif ph == "C":
                self._counter(ev)
            elif ph in ("s", "t", "f"):
                ts_ns = ns(ev.ts)
                if ts_ns < 0 or ev.id is None:
                    self.unknown[f"flow event without id or time ({ph})"] += 1
                    continue
                b.add_flow_point(src, str(ev.id), ev.cat, ph, thread(src, ev.pid, ev.tid), ts_ns,
                                 enclosing=ev.bp == "e" or ph != "f")
            elif ph in ("b", "e", "S", "T", "F", "p"):
                self._async(ev)
            else:
                self.unknown[f"events with unknown phase {ph!r} (kept as instants)"] += 1
                self._instant(ev)
        self._pair_begin_end()
        self._close_async()
        for msg, count in self.unknown.items():
            b.warn("unknown_event", msg, count, self.filename)
        if self.bad_time:
            b.warn("bad_time", "events with a missing, negative, NaN or out-of-range time or duration (not stored)",
                   self.bad_time, self.filename)

    def _metadata(self, ev: Event) -> None:
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

    def _instant(self, ev: Event) -> None:
        ts_ns = self.ns(ev.ts)
        if ts_ns < 0:
            self.bad_time += 1
            return
        if ev.name == "[memory]":
            self._memory(ev, ts_ns)
            return
        self.b.add_instant(self.b.thread(self.src, ev.pid, ev.tid), ts_ns, ev.name, ev.cat or ev.ph,
                           bytes(ev.args).decode())
        self.stored += 1

    def _memory(self, ev: Event, ts_ns: int) -> None:
        args = _ANY.decode(ev.args)
        if not isinstance(args, dict):
            return
        device_type = args.get("Device Type", 0)
        device_id = args.get("Device Id", -1)
        where = "CPU" if device_type == 0 else f"device {device_type}:{device_id}"
        for key, label in (("Total Allocated", "allocated"), ("Total Reserved", "reserved")):
            value = args.get(key)
            if isinstance(value, int | float):
                self.b.add_counter(self.src, ev.pid, f"memory {label} ({where}) [bytes]", ts_ns, float(value))
        self.stored += 1

    def _counter(self, ev: Event) -> None:
        ts_ns = self.ns(ev.ts)
        args = _ANY.decode(ev.args)
        if ts_ns < 0 or not isinstance(args, dict):
            self.bad_time += ts_ns < 0
            return
        base = ev.name if ev.id is None else f"{ev.name} {ev.id}"
        for key, value in args.items():
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
                series = base if len(args) == 1 else f"{base}.{key}"
                self.b.add_counter(self.src, ev.pid, series, ts_ns, float(value))
        self.stored += 1

    def _async(self, ev: Event) -> None:
        ts_ns = self.ns(ev.ts)
        if ts_ns < 0:
            self.bad_time += 1
            return
        ident = str(ev.id) if ev.id is not None else bytes(ev.id2).decode()
        key = (ev.cat, ident, ev.name if ev.ph in ("S", "F", "T", "p") else "")
        if ev.ph in ("b", "S"):
            self.async_open[key].append((ts_ns, ev))
        elif ev.ph in ("e", "F"):
            opened = self.async_open.get(key) or self.async_open.get((ev.cat, ident, ""))
            if not opened:
                self.unknown[f"async end events without a begin ({ev.ph})"] += 1
                return
            start_ns, begin = opened.pop()
            self._add_async(begin, start_ns, ts_ns)
        else:  # T / p steps: keep as instants on the async track
            self.b.add_instant(self._async_thread(ev), ts_ns, ev.name, ev.cat or ev.ph, bytes(ev.args).decode())
            self.stored += 1

    def _async_thread(self, ev: Event) -> int:
        track = f"async {ev.cat}".strip()
        self.b.set_thread_name(self.src, ev.pid, track, track)
        return self.b.thread(self.src, ev.pid, track)

    def _add_async(self, begin: Event, start_ns: int, end_ns: int) -> None:
        if end_ns < start_ns:
            self.unknown["async spans that end before they begin"] += 1
            return
        self.b.add_slice(self._async_thread(begin), begin.cat, begin.name, start_ns, end_ns - start_ns,
                         bytes(begin.args).decode(), lane=Lane.OTHER)
        self.stored += 1

    def _close_async(self) -> None:
        left = sum(len(v) for v in self.async_open.values())
        if left:
            self.b.warn("unclosed_async", "async begin events without an end (kept as instants)", left,
                        self.filename)
            for opened in self.async_open.values():
                for ts_ns, ev in opened:
                    self.b.add_instant(self._async_thread(ev), ts_ns, ev.name, ev.cat or ev.ph,
                                       bytes(ev.args).decode())

    def _pair_begin_end(self) -> None:
        """Match E to the latest open B on its thread, in time order (stable for equal times)."""
        unmatched_end = unclosed = 0
        for thread, items in self.be_events.items():
            items.sort(key=lambda it: (it[0], it[1]))
            stack: list[tuple[int, Event]] = []
            for ts_ns, _order, ev in items:
                if ev.ph == "B":
                    stack.append((ts_ns, ev))
                elif stack:
                    start_ns, begin = stack.pop()
                    args = begin.args if len(ev.args) <= 2 else _merge_args(begin.args, ev.args)
                    self.b.add_slice(thread, begin.cat or ev.cat, begin.name or ev.name, start_ns,
                                     ts_ns - start_ns, bytes(args).decode())
                    self.stored += 1
                else:
                    unmatched_end += 1
            for ts_ns, begin in stack:
                unclosed += 1
                self.stored += 1
                self.b.add_instant(thread, ts_ns, begin.name, begin.cat or "B", bytes(begin.args).decode())
        if unmatched_end:
            self.b.warn("unmatched_end", "E events without a matching B (ignored)", unmatched_end, self.filename)
        if unclosed:
            self.b.warn("unclosed_begin", "B events without a matching E (kept as instants)", unclosed,
                        self.filename)


def _kineto_args(raw: msgspec.Raw) -> KinetoArgs:
    if len(raw) <= 2:
        return KinetoArgs()
    try:
        return _ARGS.decode(raw)
    except msgspec.ValidationError:
        return KinetoArgs()  # odd types in args: the raw text is still stored


def _id(value: int) -> int:
    return value if 0 <= value < 2**63 else NONE


def _merge_args(begin: msgspec.Raw, end: msgspec.Raw) -> msgspec.Raw:
    a = _ANY.decode(begin)
    b = _ANY.decode(end)
    if isinstance(a, dict) and isinstance(b, dict):
        return msgspec.Raw(msgspec.json.encode({**a, **b}))
    return begin
