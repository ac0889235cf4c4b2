"""Parsers for Neuron's JSON system-profile files: the current `neuron-explorer view --output-format
json` export (`trace_event` + `warnings`), the older Profiler 2.0 `system_profile.json`
(`trace_events` with `group`/`type`, `mem_usage`, `cpu_util`) and the runtime's
`nrt_sys_trace_fetch_events` output (start/stop records). Lanes and tracks: neuron.py. JSON numbers
with a fraction or exponent decode as Decimal, so epoch-ns times (> 2**53) stay exact.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from decimal import Decimal
from typing import Any, TypeGuard

import msgspec

from explorer.errors import BadTrace
from explorer.ingest.builder import TraceBuilder
from explorer.ingest.neuron.rules import ARGS_ENCODER, NeuronSink, Source, as_ns

log = logging.getLogger(__name__)

PROFILE2_FRAMEWORK_TYPE = 99999
_GROUP_NC = re.compile(r"^nrt-nc-(\d+)$")
_GROUP_FRAMEWORK = re.compile(r"^framework-(.+)$")
_DECODER = msgspec.json.Decoder(float_hook=Decimal)

# time field names, in order of preference (all nanoseconds)
START_FIELDS = ("timestamp", "start_ts", "timestamp_ns", "start_timestamp_ns", "nc_start_timestamp_ns", "ts")
DURATION_FIELDS = ("duration", "duration_ns", "dur")
END_FIELDS = ("end_ts", "end_timestamp_ns", "nc_stop_timestamp_ns", "stop_timestamp_ns")


def _decode_object(data: bytes, filename: str) -> dict[str, Any]:
    if not data.strip():
        raise BadTrace(filename, "the file is empty")
    try:
        doc = _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise BadTrace(filename, f"not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise BadTrace(filename, "expected a JSON object")
    return doc


def _list_field(doc: dict[str, Any], key: str, filename: str) -> list[Any]:
    value = doc.get(key, [])
    if not isinstance(value, list):
        raise BadTrace(filename, f"{key!r} is not a list")
    return value


def event_times(fields: dict[str, Any]) -> tuple[int | None, int | None]:
    """(start, duration) in ns from whichever time fields the event has."""
    start = next((as_ns(fields[k]) for k in START_FIELDS if k in fields), None)
    dur = next((as_ns(fields[k]) for k in DURATION_FIELDS if k in fields), None)
    if dur is None and start is not None:
        end = next((as_ns(fields[k]) for k in END_FIELDS if k in fields), None)
        dur = end - start if end is not None and end >= start else None
    return start, dur


def _finish(sink: NeuronSink, bad_entries: int, what: str) -> dict[str, Any]:
    if bad_entries:
        sink.b.warn("mistyped_event", f"{what} entries that are not JSON objects (not stored)", bad_entries,
                    sink.filename)
    sink.report()
    return {"format": what}


def parse_neuron_json(data: bytes, filename: str, builder: TraceBuilder, instance: str = "") -> dict[str, Any]:
    """The current JSON export: `{"trace_event": [...], "warnings": [...]}`."""
    doc = _decode_object(data, filename)
    entries = _list_field(doc, "trace_event", filename)
    sink = NeuronSink(builder, filename, instance)
    bad = 0
    for entry in entries:
        if not isinstance(entry, dict):
            bad += 1
            continue
        ts_ns, dur_ns = event_times(entry)
        sink.add(entry, str(entry.get("name", "")), ts_ns, dur_ns, instance=str(entry.get("instance_id") or ""))
    for text in _list_field(doc, "warnings", filename):
        message = text if isinstance(text, str) else ARGS_ENCODER.encode(text).decode()
        builder.warn("neuron_warning", f"Neuron profiler: {message}", 1, filename)
    if sink.stored == 0 and not sink.skipped_framework:
        raise BadTrace(filename, "the Neuron system profile holds no usable events")
    return _finish(sink, bad, "neuron_json")


def parse_neuron_profile2(data: bytes, filename: str, builder: TraceBuilder,
                          instance: str = "") -> dict[str, Any]:
    """Profiler 2.0 `system_profile.json`: `trace_events` grouped by `group`, plus memory and CPU series."""
    doc = _decode_object(data, filename)
    sink = NeuronSink(builder, filename, instance)
    bad = 0
    for entry in _list_field(doc, "trace_events", filename):
        if not isinstance(entry, dict):
            bad += 1
            continue
        fields, tid = _profile2_fields(entry)
        ts_ns, dur_ns = event_times(fields)
        sink.add(fields, str(fields.get("name", "")), ts_ns, dur_ns, tid=tid,
                 instance=str(fields.get("instance_id") or ""), own_id=_text(fields.get("id")),
                 parent_id=_text(fields.get("parent_id")))
    counters = _profile2_counters(doc, sink)
    if sink.stored == 0 and counters == 0 and not sink.skipped_framework:
        raise BadTrace(filename, "the system profile holds no usable events")
    return _finish(sink, bad, "neuron_profile2")


def _text(value: object) -> str:
    return "" if value is None or isinstance(value, dict | list) else str(value)


def _profile2_fields(entry: dict[str, Any]) -> tuple[dict[str, Any], object]:
    """Profiler 2.0 says lane and core through `group` and `type`: make them explicit fields."""
    fields = dict(entry)
    group = str(entry.get("group", ""))
    tid: object = None
    framework = _GROUP_FRAMEWORK.match(group)
    if entry.get("type") == PROFILE2_FRAMEWORK_TYPE or framework:
        fields.setdefault("trace_event_source", Source.FRAMEWORK.value)
        tid = framework.group(1) if framework else entry.get("thread_id")
    nc = _GROUP_NC.match(group)
    if nc and "nc_idx" not in fields:
        fields["nc_idx"] = int(nc.group(1))
    return fields, tid


def _profile2_counters(doc: dict[str, Any], sink: NeuronSink) -> int:
    stored = 0
    src = sink.src()
    pid = sink.pid(None)
    for point in doc.get("mem_usage") or []:
        ts_ns = as_ns(point.get("timestamp")) if isinstance(point, dict) else None
        if ts_ns is None or not isinstance(point, dict):
            sink.bad_time += 1
            continue
        for key, series in (("usage", "host memory [bytes]"), ("percent_usage", "host memory [%]")):
            value = point.get(key)
            if _is_value(value):
                sink.b.add_counter(src, pid, series, ts_ns, float(value))
                stored += 1
    for point in doc.get("cpu_util") or []:
        ts_ns = as_ns(point.get("timestamp")) if isinstance(point, dict) else None
        if ts_ns is None or not isinstance(point, dict):
            sink.bad_time += 1
            continue
        value = point.get("util")
        if _is_value(value):
            sink.b.add_counter(src, pid, f"CPU {point.get('cpu_id', 'all')} utilization [%]", ts_ns, float(value))
            stored += 1
    return stored


def _is_value(value: object) -> TypeGuard[int | Decimal]:
    """A counter value (not a time: these may become floats)."""
    return isinstance(value, int | Decimal) and not isinstance(value, bool) and (
        not isinstance(value, Decimal) or value.is_finite())


def parse_neuron_nrt(data: bytes, filename: str, builder: TraceBuilder, instance: str = "") -> dict[str, Any]:
    """`nrt_sys_trace_fetch_events` output: start/stop records paired by (nc_idx, tracking_id)."""
    doc = _decode_object(data, filename)
    sink = NeuronSink(builder, filename, instance)
    open_starts: dict[tuple[object, object], list[dict[str, Any]]] = defaultdict(list)
    records = [r for r in _list_field(doc, "events", filename) if isinstance(r, dict)]
    bad = len(_list_field(doc, "events", filename)) - len(records)
    records.sort(key=lambda r: as_ns(r.get("timestamp_ns")) or 0)
    unmatched_stop = 0
    for record in records:
        key = (_hashable(record.get("nc_idx")), _hashable(record.get("tracking_id")))
        if record.get("phase") == "start":
            open_starts[key].append(record)
        elif record.get("phase") == "stop" and open_starts.get(key):
            _add_nrt_pair(sink, open_starts[key].pop(), record)
        else:
            unmatched_stop += 1
    unclosed = sum(len(v) for v in open_starts.values())
    if unmatched_stop:
        builder.warn("unmatched_end", "runtime stop records (or unknown phases) without a start (ignored)",
                     unmatched_stop, filename)
    if unclosed:
        builder.warn("unclosed_begin", "runtime start records without a stop (not stored)", unclosed, filename)
    if sink.stored == 0:
        raise BadTrace(filename, "no runtime event has both a start and a stop record")
    return _finish(sink, bad, "neuron_nrt")


def _hashable(value: object) -> object:
    """A pairing key part: a list or object id (malformed, but seen) pairs by its JSON text."""
    return value if isinstance(value, int | str | Decimal | None) else msgspec.json.encode(value)


def _add_nrt_pair(sink: NeuronSink, start: dict[str, Any], stop: dict[str, Any]) -> None:
    start_ns = as_ns(start.get("timestamp_ns"))
    stop_ns = as_ns(stop.get("timestamp_ns"))
    fields: dict[str, Any] = {}
    for record in (start, stop):
        extra = record.get("data")
        if isinstance(extra, dict):
            fields.update(extra)
    fields.update({k: v for k, v in start.items() if k not in ("data", "phase", "timestamp_ns")})
    dur = stop_ns - start_ns if start_ns is not None and stop_ns is not None and stop_ns >= start_ns else None
    sink.add(fields, str(start.get("event_type", "")), start_ns, dur)
