"""Parser for the Chrome Trace Event Format and its Kineto dialect: typed msgspec structs handed to the Feeder
(explorer.ingest.chrome.feed), with a tolerant per-event path that reports, not drops, wrongly typed
events. Times are int or Decimal, never float, and become ns only through explorer.ingest.times."""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

import msgspec

from explorer.errors import BadTrace
from explorer.ingest.builder import TraceBuilder
from explorer.ingest.chrome.feed import NO_RAW, Event, Fed, Feeder
from explorer.ingest.chrome.json_check import CheckedEvent, refusal
from explorer.ingest.times import to_ns

log = logging.getLogger(__name__)


class ObjectDoc(msgspec.Struct):
    traceEvents: list[Event] = []  # noqa: N815 - field names are the format's
    displayTimeUnit: str | None = None  # noqa: N815
    baseTimeNanoseconds: int | Decimal | None = None  # noqa: N815
    deviceProperties: msgspec.Raw = NO_RAW  # noqa: N815
    distributedInfo: msgspec.Raw = NO_RAW  # noqa: N815
    host_name: str | None = None  # recent Kineto: the profiled machine (explorer.ingest.ranks: the rank's host)


class LooseDoc(msgspec.Struct):
    traceEvents: list[Any] = []  # noqa: N815
    baseTimeNanoseconds: int | Decimal | None = None  # noqa: N815
    deviceProperties: Any = None  # noqa: N815
    distributedInfo: Any = None  # noqa: N815


MAX_HOST_CHARS = 255  # a host name longer than DNS allows is cut, not stored whole
_DOC = msgspec.json.Decoder(ObjectDoc, strict=False)
_ARRAY = msgspec.json.Decoder(list[Event], strict=False)
_LOOSE = msgspec.json.Decoder(strict=False, float_hook=Decimal)
_RAW_ENCODER = msgspec.json.Encoder(decimal_format="number")  # Decimals from _LOOSE back as JSON numbers
_ANY = msgspec.json.Decoder()
__all__ = ["CheckedEvent", "refusal"]  # the check of the DuckDB path (explorer.ingest.chrome.json_check), named here too


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
        return doc.traceEvents, doc_meta(to_ns(doc.baseTimeNanoseconds), doc.deviceProperties,
                                          doc.distributedInfo, doc.displayTimeUnit, doc.host_name), 0
    except msgspec.ValidationError:
        pass  # some event has unexpected types: go event by event below
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _not_json(filename, exc) from None
    try:
        loose = _LOOSE.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise _not_json(filename, exc) from None
    if isinstance(loose, dict):
        raw_events = loose.get("traceEvents", [])
        meta = doc_meta(to_ns(loose.get("baseTimeNanoseconds")), None, None, None)
    else:
        raw_events, meta = loose, {}
    if not isinstance(raw_events, list):
        raise BadTrace(filename, "'traceEvents' is not a list")
    events: list[Event] = []
    bad = 0
    for raw in raw_events:
        try:
            events.append(msgspec.convert(_rawify_args(raw), Event, strict=False))
        except (msgspec.ValidationError, TypeError, RecursionError):
            bad += 1
    return events, meta, bad


def _not_json(filename: str, exc: Exception) -> BadTrace:
    """One clear line for a document msgspec cannot read (bad JSON, a number no integer type holds,
    nesting past the decoder's depth limit)."""
    if isinstance(exc, RecursionError):
        return BadTrace(filename, "not readable JSON (values nested too deep)")
    return BadTrace(filename, f"not valid JSON ({exc})")


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


def doc_meta(base: int | None, devices: msgspec.Raw | None, dist: msgspec.Raw | None,
              unit: str | None, host: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"base_ns": base or 0}
    if host and host.strip():
        meta["host_name"] = host.strip()[:MAX_HOST_CHARS]
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
    try:
        fed = Feeder(builder, src, filename, int(meta.get("base_ns", 0))).feed(events)
    except UnicodeDecodeError as exc:  # msgspec checks strings, not the raw args text it hands over as is
        raise BadTrace(filename, f"not valid UTF-8 text (byte {exc.object[exc.start]:#04x} in an event's args)") from None
    return with_format(meta, fed, builder, filename)


def with_format(meta: dict[str, Any], fed: Fed, builder: TraceBuilder, filename: str) -> dict[str, Any]:
    """The document metadata with its dialect, once a file is fed; a file with nothing usable is refused,
    naming what the feeder warned about (the same words on both parser paths)."""
    if fed.stored == 0:
        problems = "; ".join(f"{w.count} {w.message}" for w in builder.warnings.values() if w.source == filename)
        raise BadTrace(filename, f"no usable events ({problems or 'only metadata'})")
    meta["format"] = "kineto" if fed.kineto else "chrome"
    return meta
